"""``python -m ctxtool`` runs the CLI."""

try:
    from .cli import main
except KeyboardInterrupt:  # Ctrl-C while Python finds the package, before its own guard
    from .interrupts import exit_interrupted

    exit_interrupted()

main(prog_name="ctxtool")
