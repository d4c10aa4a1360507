"""Parameter types every command shares for numbers: whole numbers the store can hold and finite
decimals.

click's IntRange takes any integer (2**64 then fails inside the database driver, or SQLite's,
as a bug) and its FloatRange takes ``nan`` and ``inf``. A configuration file's values reach the
same types as TOML values: ``1e400`` is ``inf``, ``[1]`` a list, ``true`` a bool, ``4.5`` a float
that IntRange would quietly truncate. Each is a usage error naming the value here.
"""

from __future__ import annotations

import math

import click

from ..db.schema import BIGINT_MAX


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
        from ..tokens import unknown_encoding

        if not isinstance(value, str):
            self.fail(f"{value!r} is not an encoding name", param, ctx)
        problem = unknown_encoding(value)
        if problem:
            self.fail(problem, param, ctx)
        return value
