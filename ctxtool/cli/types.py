"""Parameter types of the commands: whole numbers the store can hold, finite decimals, durations
and points in time, encoding names.

click's IntRange takes any integer (2**64 then fails inside the database driver, or SQLite's,
as a bug) and its FloatRange takes ``nan`` and ``inf``. A configuration file's values reach the
same types as TOML values: ``1e400`` is ``inf``, ``[1]`` a list, ``true`` a bool, ``4.5`` a float
that IntRange would quietly truncate. Each is a usage error naming the value here.
"""

from __future__ import annotations

import importlib
import math
from datetime import UTC, date, datetime, timedelta

import click

from ..core.durations import parse_duration
from ..core.errors import CtxtoolError
from ..core.tokens import unknown_encoding
from ..db.schema import BIGINT_MAX
from ..output import DEFAULT_TABLE_FORMAT, table_formats


class WholeNumber(click.IntRange):
    """An integer within ``min``..``max`` (at most BIGINT_MAX): ``--limit``, ``--workers``,
    token counts, checkpoint ids."""

    def __init__(self, min: int | None = None, max: int | None = None, **kwargs):
        low = -BIGINT_MAX - 1 if min is None else min
        super().__init__(low, BIGINT_MAX if max is None else max, **kwargs)

    def convert(self, value, param, ctx):
        if isinstance(value, bool) or not isinstance(value, (int, str)):
            self.fail(f"{value!r} is not a whole number", param, ctx)
        number = click.INT.convert(value, param, ctx)
        if not -BIGINT_MAX - 1 <= number <= BIGINT_MAX:
            self.fail(
                f"{number} is out of range: the store holds whole numbers up to {BIGINT_MAX}",
                param,
                ctx,
            )
        return super().convert(number, param, ctx)

    def _describe_range(self) -> str:
        """The help's range without the store's own bounds (``x>=1``, as click writes it)."""
        low, high = self.min, self.max
        try:
            self.min = None if low == -BIGINT_MAX - 1 else low
            self.max = None if high == BIGINT_MAX else high
            return super()._describe_range() if (self.min, self.max) != (None, None) else ""
        finally:
            self.min, self.max = low, high


class TokenCount(WholeNumber):
    """A number of tokens, also as people write a window: ``4k`` (4,000), ``128k``, ``1m``
    (1,000,000), as providers state their windows in thousands."""

    _SUFFIXES = {"k": 1_000, "m": 1_000_000}
    _UNIT = "tokens"

    def convert(self, value, param, ctx):
        if isinstance(value, str) and value[-1:].lower() in self._SUFFIXES:
            number = value[:-1].strip()
            if not number.isdigit():
                self.fail(
                    f"{value!r} is not a number of {self._UNIT} (e.g. 4000 or 4k)", param, ctx
                )
            value = int(number) * self._SUFFIXES[value[-1].lower()]
        return super().convert(value, param, ctx)


class ByteCount(TokenCount):
    """A number of bytes, with the same suffixes: ``64k`` (64,000), ``50m`` (50,000,000)."""

    _UNIT = "bytes"


class FiniteNumber(click.FloatRange):
    """A finite decimal within the range (``--timeout``, ``--min-carry-over``): ``nan`` and
    ``inf`` are refused, as is ``1e400``, which is ``inf`` once read."""

    def convert(self, value, param, ctx):
        if isinstance(value, bool) or not isinstance(value, (int, float, str)):
            self.fail(f"{value!r} is not a number", param, ctx)
        number = click.FLOAT.convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number", param, ctx)
        return super().convert(number, param, ctx)


class EncodingName(click.ParamType):
    """A tiktoken encoding's name (``--encoding``): one tiktoken does not know is a usage error
    listing those it does, before anything is read."""

    name = "encoding"

    def convert(self, value, param, ctx):
        if not isinstance(value, str):
            self.fail(f"{value!r} is not an encoding name", param, ctx)
        problem = unknown_encoding(value)
        if problem:
            self.fail(problem, param, ctx)
        return value


class Duration(click.ParamType):
    """``90s``, ``10m``, ``2h``, ``1d``: a bad one is a usage error (exit 2)."""

    name = "duration"

    def convert(self, value, param, ctx):
        try:
            return parse_duration(value)
        except CtxtoolError as exc:
            self.fail(str(exc), param, ctx)


class SinceType(click.ParamType):
    """A point in time: an ISO date or time (UTC), or an age such as 30m, 12h, 7d, 2w."""

    name = "SINCE"
    takes_dates = True  # a configuration file's TOML date or date-time is one too

    def convert(self, value, param, ctx):
        if isinstance(value, datetime):
            when = value
        elif isinstance(value, date):
            when = datetime(value.year, value.month, value.day)
        else:
            text = str(value).strip()
            if text[-1:] in ("s", "m", "h", "d", "w"):  # an age, read as compact's --older-than
                try:
                    seconds = parse_duration(text)
                except CtxtoolError as exc:
                    self.fail(str(exc), param, ctx)
                return datetime.now(UTC).replace(tzinfo=None) - timedelta(seconds=seconds)
            try:
                when = datetime.fromisoformat(text)
            except ValueError:
                self.fail(
                    f"{text!r} is neither a date/time (2026-03-01, 2026-03-01T12:00) nor an "
                    "age (30m, 12h, 7d, 2w)",
                    param,
                    ctx,
                )
        if when.tzinfo is not None:
            try:
                when = when.astimezone(UTC).replace(tzinfo=None)
            except OverflowError:
                self.fail(f"{value!s} is outside the years a time in UTC can have", param, ctx)
        return when


class TranscriptFormat(click.Choice):
    """One of the transcript formats ``import`` reads (``ctxtool.transcripts.FORMATS``). Their
    parsers are loaded when the choices are first read (a value given, a help shown): a
    command that only filters by a format's name, such as ``sessions list``, runs without."""

    def __init__(self) -> None:
        super().__init__(())

    @property
    def choices(self) -> tuple[str, ...]:
        # Loaded by name, as the root loads a command's module: when it is needed.
        return importlib.import_module("ctxtool.transcripts").FORMATS

    @choices.setter
    def choices(self, _value) -> None:
        pass


class TableFormat(click.Choice):
    """A table style of ``--fmt``: one of tabulate's, which is loaded when the choices are
    first read (another style given, a help or a Tab listing them). The default style is taken
    as it is: a command printing JSON, or the default table, never lists them."""

    def __init__(self) -> None:
        super().__init__(())

    @property
    def choices(self) -> tuple[str, ...]:
        return tuple(table_formats())

    @choices.setter
    def choices(self, _value) -> None:
        pass

    def convert(self, value, param, ctx):
        if value == DEFAULT_TABLE_FORMAT:
            return value
        return super().convert(value, param, ctx)
