"""``python -m ctxtool`` runs the CLI."""

try:
    from .cli import main
except KeyboardInterrupt:  # Ctrl-C while Python finds the package, before its own guard
    import sys

    from .interrupts import INTERRUPTED

    sys.stderr.write("Error: interrupted\n")
    raise SystemExit(INTERRUPTED) from None

main(prog_name="ctxtool")
