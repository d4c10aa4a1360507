"""``python -m ctxtool`` runs the CLI."""

from .cli import main

main(prog_name="ctxtool")
