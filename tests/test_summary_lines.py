"""How the extractive summary shortens a line (issue #42: "a report line with rates, or
release versions, is cut just before the number that mattered"), on plain strings: a cut never
ends inside or just before a number or a version; a report line carrying numbers is kept whole
or dropped, never shortened in front of its figures."""

from __future__ import annotations

import json
import re

from ctxtool.compaction.summarizers.span_notes import (
    NUMBER_LINE_CHARS,
    NUMBER_REACH,
    _call_line,
    report_line,
    reported,
    whole_sentences,
    word_cut,
)


def test_a_cut_takes_the_number_after_it_along():
    line = "The pass rate of the nightly suite on the main branch went from 71.4% to 98.2% today"
    # "went [cut] from 71.4% to 98.2%": the figures end within the reach, they come along
    assert whole_sentences(line, 60) == line.removesuffix(" today") + " […]"


def test_a_cut_never_ends_just_before_a_version():
    line = "Released the package to PyPI as version v2.13.0-rc.1 after the changelog was merged"
    cut = whole_sentences(line, 48)
    assert "v2.13.0-rc.1" in cut
    assert not re.search(r"version \[…\]$", cut)


def test_numbers_too_far_past_the_limit_move_the_cut_back_to_the_clause_before_them():
    numbers = " ".join(str(n) for n in range(1000, 1030))  # far more than NUMBER_REACH
    line = f"Measured the latencies of the new cache layer, in order: {numbers}"
    assert len(numbers) > NUMBER_REACH
    at = word_cut(line, 70)
    assert line[:at] == "Measured the latencies of the new cache layer, in order"
    assert whole_sentences(line, 70) == line[:at] + " […]"


def test_a_line_without_numbers_is_cut_between_words_as_before():
    line = "Refactored the parser so that it reads the whole file before splitting it up"
    assert whole_sentences(line, 40) == "Refactored the parser so that it reads […]"
    assert word_cut("short", 40) == len("short") or whole_sentences("short", 40) == "short"


def test_a_report_line_with_figures_is_kept_whole_up_to_its_limit():
    figures = (
        "- `bench.py`: p50 12.1 ms → 8.4 ms, p99 40.2 ms → 19.9 ms, throughput 1,840 → 2,610 req/s"
    )
    assert report_line(figures, 60) == figures
    prose = "- `bench.py` was rewritten to run each round in its own process with a fresh cache"
    assert report_line(prose, 60).endswith("[…]")
    too_long = "- `x.py` " + "12.5 ms, " * (NUMBER_LINE_CHARS // 9)
    assert len(report_line(too_long, 60)) < len(too_long)


def test_a_report_keeps_its_version_line_whole():
    report = (
        "Done. Summary of the release:\n"
        "- Bumped `pyproject.toml` from 0.41.2 to 0.42.0 and tagged `v0.42.0` on main, "
        "then pushed the tag and the wheel to PyPI (sha256 9f2c1e)\n"
        "- Updated the docs\n"
    )
    said = reported(report, 100)
    assert "0.41.2 to 0.42.0 and tagged `v0.42.0`" in said and "(sha256 9f2c1e)" in said


def test_a_call_says_what_it_acted_on():
    """A tool with no command nor path is shown with the URL it acted on."""

    def call(name: str, **arguments) -> dict:
        return {"id": "c", "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}  # fmt: skip

    assert _call_line(call("fetch_url", url="https://a.example/post")) == (
        "fetch_url https://a.example/post"
    )
    assert _call_line(call("cite", source="https://a.example/b", year=2026)) == (
        "cite https://a.example/b"
    )
    assert _call_line(call("cite", source="a book")) == "cite"
