"""The pure rules (issue #41): plain records and functions over plain lists, no database, no
network, no click."""
