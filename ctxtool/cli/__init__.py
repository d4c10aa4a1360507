"""The ``ctxtool`` command: a thin click layer over the library.

This package only assembles it: the root group (``root``, which names every command and
loads its module when it runs) and one module per group of commands, each adding its
commands to the root. What every command is handed is ``app``, the
options several commands share are ``options``, the configuration file's defaults
``config_defaults``, the guarded standard streams ``streams``.
"""

from __future__ import annotations

from ..interrupts import caused_by_interrupt, exit_interrupted

try:
    # The root names every command; each command's module is imported when it is resolved.
    from .root import main
except BaseException as exc:
    # Ctrl-C in the second the modules take to load: the line and exit code it has later
    # (ctxtool.failures), not a traceback through the import machinery. Python may wrap it:
    # landing in a class being made, it is the cause of a RuntimeError ("Error calling
    # __set_name__").
    # The chain may loop (an exception set as its own context's context): each one once.
    if not caused_by_interrupt(exc):
        raise
    exit_interrupted()

__all__ = ["main"]
