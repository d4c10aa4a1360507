"""The readers of a request and of the agent's report stay linear in blank lines (review of
session 14: a 40 KB message of blank lines took seconds)."""

from __future__ import annotations

import time

from ctxtool.core.work_state import own_words, reported_done

# -- blank lines are read once ---------------------------------------------------------------


def _best_time(fn, *args) -> float:
    """The least of three calls' CPU time in this thread (other processes do not stretch it)."""
    best = float("inf")
    for _ in range(3):
        t = time.thread_time()
        fn(*args)
        best = min(best, time.thread_time() - t)
    return best


def test_fences_and_report_lines_are_found_in_linear_time_over_blank_lines():
    small, large = "```\n" + " \n" * 1000, "```\n" + " \n" * 8000
    assert own_words("ask\n  ```\ncode\n  ```\nafter") == "ask after"
    assert reported_done("Sounds:\n\n**SFX added:**\n")  # a heading line
    for fn in (own_words, reported_done):
        ratio = _best_time(fn, large) / max(_best_time(fn, small), 1e-6)
        assert ratio < 24, (fn.__name__, ratio)  # 8x the input: ~8x linear, ~64x quadratic
