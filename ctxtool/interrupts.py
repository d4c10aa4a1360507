"""Ctrl-C, told apart from a failure: its exit code, and whether an exception came from it.

Python may wrap the interrupt (landing in a class being made it is the cause of a
RuntimeError), and a module it stopped half-way fails again when imported later, with the
interrupt as that failure's context. Both are the interrupt, said in one line with exit 130.
This module imports nothing, so it can answer while the other modules are still loading.
"""

from __future__ import annotations

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
