"""The budget spent by value (issue #42 item 5) and report lines with figures kept whole (item
3), each rule on plain lists and on a real span of the shared transcripts."""

from __future__ import annotations

import pytest

from ctxtool.compaction.summarizers.extractive import (
    CONSTRAINTS,
    ERRORS,
    FILES_CHANGED,
    READ,
    _Item,
    _trim_order,
)

from .keyed_spans import extractive_summary, keyed_span_named, section

RETRY = (
    "- Edit refused (3 times): File has not been read yet — fixed: retried at once, it succeeded"
)
FIX = "- `npm run build` failed: error TS2339 — fixed: a later run succeeded after changing a.ts"


@pytest.fixture(scope="module")
def span(tmp_path_factory):
    def load(name: str):
        return keyed_span_named(name, tmp_path_factory.mktemp(name[:30]))

    return load


def _items() -> dict[str, _Item]:
    return {
        "retry": _Item(ERRORS, RETRY, 5, resolved=True, retry=True),
        "fix": _Item(ERRORS, FIX, 1, resolved=True),
        "read": _Item(READ, "src/a.py", 2),
        "reason": _Item(FILES_CHANGED, "- `a.ts` — why", 3, fallback="- `a.ts`"),
        "old": _Item(FILES_CHANGED, "- `b.ts`", 0),
        "rule": _Item(CONSTRAINTS, "- never push", 4),
    }


@pytest.mark.parametrize("allowed", [None, 3])
def test_a_fix_is_cut_after_the_noise_the_read_paths_and_the_reasons(allowed):
    items = _items()
    order = [i.text for i in _trim_order(list(items.values()), allowed)]
    at = {name: order.index(item.text) for name, item in items.items()}
    assert at["retry"] < at["read"] < at["reason"] < at["fix"] < at["rule"]
    if allowed is None:  # among the other items by age: the older file goes first
        assert at["old"] < at["fix"]


def test_paradocs_fixed_fetch_failure_stays_at_8k(span):
    paradocs = span("pi--paradocs-session--committed")
    small = section(extractive_summary(paradocs, 1500), ERRORS)
    fetch = [i for i in small if i.startswith("- `fetch_url")]
    assert fetch, small
    assert "HTTP fallback failed" in fetch[0]
    assert "— fixed: `batch_extract_failed` succeeded" in fetch[0]
