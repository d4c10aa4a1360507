"""ctxtool: operations toolkit for the MySQL context stores of LLM agents.

The rules are ``ctxtool.core``; the store (``ctxtool.store`` over ``ctxtool.db``) reads and
writes the tables; the services (``ctxtool.importer``, ``ctxtool.compaction``,
``ctxtool.migrate``, ...) do the jobs; ``ctxtool.cli`` only parses and prints.
"""

__version__ = "0.1.0"
