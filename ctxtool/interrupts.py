"""Ctrl-C, told apart from a failure: its exit code, and whether an exception came from it.

Python may wrap the interrupt (landing in a class being made it is the cause of a
RuntimeError), and a module it stopped half-way fails again when imported later, with the
interrupt as that failure's context. Both are the interrupt, said in one line with exit 130.
This module imports only sys and typing, so it can answer while the other modules are
still loading.
"""

from __future__ import annotations

import sys
from typing import NoReturn

INTERRUPTED = 130  # the shell's code for a command stopped by SIGINT


def caused_by_interrupt(exc: BaseException) -> bool:
    """Whether ``exc`` is a KeyboardInterrupt or has one in its chain of causes and contexts
    (each link once: a chain may loop)."""
    cause: BaseException | None = exc
    seen: set[int] = set()
    while cause is not None and id(cause) not in seen:
        if isinstance(cause, KeyboardInterrupt):
            return True
        seen.add(id(cause))
        cause = cause.__cause__ or cause.__context__
    return False


def exit_interrupted() -> NoReturn:
    """End the process as an interrupted command does, for a Ctrl-C that lands before the
    command line's own handling is loaded: one line on stderr, exit 130."""
    sys.stderr.write("Error: interrupted\n")
    raise SystemExit(INTERRUPTED) from None
