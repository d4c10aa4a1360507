"""Standard output and error while a command runs: a closed pipe (``| head``) is no error, and
output that cannot be written (a full disk, ``> /dev/full``) is one line, never a traceback."""

from __future__ import annotations

import contextlib
import errno
import os
import sys
from collections.abc import Iterator

import click

from ..core.errors import CtxtoolError


class OutputFailed(CtxtoolError):
    """Standard output refused what was written: a full disk or quota, ``> /dev/full``, EIO."""


class GuardedOutput:
    """``sys.stdout`` while a command runs: a write or flush that fails becomes OutputFailed,
    said in one line, instead of an OSError taken for a bug. A closed pipe (``| head``) is no
    error and no reason to stop: what is written from then on is dropped, and the command
    ends as it would have, with its own exit code and its errors on stderr (a failing
    ``migrate status | head`` must not pass a deploy gate run under ``pipefail``)."""

    def __init__(self, stream, nowhere_to_report: bool = False):
        # stderr: a write that fails there cannot be reported anywhere, so every failure is
        # dropped (``2>&1 | head``: a failing command still ends with its own exit code).
        self._stream, self._nowhere = stream, nowhere_to_report

    def write(self, text):
        try:
            return self._stream.write(text)
        except OSError as exc:
            if exc.errno != errno.EPIPE and not self._nowhere:
                raise _output_failed(exc) from None
            quiet_closed_pipe(self._stream)
            return len(text)

    def flush(self):
        try:
            return self._stream.flush()
        except OSError as exc:
            if exc.errno != errno.EPIPE and not self._nowhere:
                raise _output_failed(exc) from None
            quiet_closed_pipe(self._stream)
            try:
                self._stream.flush()  # what was buffered goes to /dev/null now
            except OSError:
                pass

    def __getattr__(self, name):
        return getattr(self._stream, name)


def _output_failed(exc: OSError) -> OSError | OutputFailed:
    if exc.errno == errno.EPIPE:
        return exc
    try:
        where = os.readlink(f"/proc/self/fd/{sys.stdout.fileno()}")
    except (OSError, ValueError, AttributeError):
        where = "standard output"
    return OutputFailed(f"cannot write the output to {where}: {exc.strerror or exc}")


@contextlib.contextmanager
def guarded_streams() -> Iterator[None]:
    """Run a command with ``sys.stdout`` and ``sys.stderr`` guarded (see GuardedOutput), what is
    still buffered flushed at the end, so it fails here and not at the interpreter's exit: said
    in one line (exit 1), or, for a closed pipe, not at all (exit 0)."""
    real, real_err = sys.stdout, sys.stderr
    sys.stdout = GuardedOutput(real) if real is not None else real
    sys.stderr = GuardedOutput(real_err, True) if real_err is not None else real_err
    try:
        try:
            yield
        finally:
            if sys.stdout is not None:  # None: started with stdout closed (>&-)
                sys.stdout.flush()  # what is still buffered fails here, not at exit
            if sys.stderr is not None:
                sys.stderr.flush()
    except OutputFailed as exc:  # while parsing (--help, --version), or the last flush
        quiet_closed_pipe()
        click.echo(f"Error: {exc}", err=True)
        sys.exit(1)
    except BrokenPipeError:
        quiet_closed_pipe()
        sys.exit(0)
    finally:
        sys.stdout, sys.stderr = real, real_err


def quiet_closed_pipe(stream=None) -> None:
    """The reader went away (``ctxtool ... | head``): what is written to ``stream`` (stdout by
    default) from now on goes to /dev/null, and nothing is said of it."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, (stream if stream is not None else sys.stdout).fileno())
    except (OSError, ValueError, AttributeError):
        pass
