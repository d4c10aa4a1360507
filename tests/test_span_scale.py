"""The span readers stay linear in the span's size: a long chat tail after a batch of calls,
a long heredoc with quoted ``;`` in a command line (review items 6, 7, 9)."""

from __future__ import annotations

import random
import re
import time

from ctxtool.compaction.summarizers import span_notes
from ctxtool.compaction.summarizers.span_notes import read_span
from ctxtool.core import outcomes
from ctxtool.core.span_facts import signals_of
from tests.test_span_facts import Span


def _chat_tail(n: int) -> Span:
    s = Span()
    s.user("Run it.")
    s.add("assistant", "Running the build.")
    s.call("shell", "Exit code: 0\nOutput:\nok", command="make")
    for k in range(n):
        s.add("assistant", f"Note {k}: looking at it.")
    return s


def test_open_in_batch_looks_at_each_message_a_bounded_number_of_times(monkeypatch):
    looked = []
    real = span_notes.work_calls

    def counted(m):
        looked.append(m.id)
        return real(m)

    monkeypatch.setattr(span_notes, "work_calls", counted)
    for n in (200, 800):
        s = _chat_tail(n)
        looked.clear()
        span_notes._open_in_batch(signals_of(s.messages), s.messages, set())
        # a quadratic search calls work_calls on every later message for each one: ~n²/2
        assert len(looked) <= 2 * len(s.messages), (n, len(looked))


def _best_time(fn, *args) -> float:
    """The least CPU time of three calls: this thread's, so that other processes sharing the
    cores (a full run, four test workers on two) do not stretch it as they stretch the wall
    clock, which made a 4x input read as 14x once under a load of 10."""
    best = float("inf")
    for _ in range(3):
        t = time.thread_time()
        fn(*args)
        best = min(best, time.thread_time() - t)
    return best


def _heredoc(n: int) -> str:
    body = "\n".join(f"    print(\"line {k}; done\"); x = '{k}'" for k in range(n))
    return "cat > gen.py <<'EOF'\n" + body + "\nEOF"


def test_unquoted_split_is_linear_in_the_line():
    small, large = _heredoc(1000), _heredoc(8000)
    sep = outcomes._STEP_SEPARATOR
    # the splits themselves: every quoted ';' is kept, every unquoted one splits
    assert len(outcomes._unquoted_split(small, sep)) == 1 + 1001 + 1000  # '\n's and bare ';'s
    ratio = _best_time(outcomes._unquoted_split, large, sep) / _best_time(
        outcomes._unquoted_split, small, sep
    )
    assert ratio < 24, ratio  # 8x the input: ~8x linear, ~64x quadratic


QUOTED_PART = re.compile(r"'[^']*'|\"(?:[^\"\\]|\\.)*\"")  # what _quoted_spans finds


def test_quoted_parts_are_the_regex_s_in_one_pass():
    rng = random.Random(7)
    alphabet = ["'", '"', "\\", "\n", "a", ";", " "]
    for _ in range(20000):
        line = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 14)))
        assert outcomes._quoted_spans(line) == [m.span() for m in QUOTED_PART.finditer(line)]
    # a double quote that never closes, then escaped ones: each was retried to the line's end
    small, large = '"\\' * 2000, '"\\' * 16000
    ratio = _best_time(outcomes.shell_steps, large) / _best_time(outcomes.shell_steps, small)
    assert ratio < 24, ratio  # 8x the input: ~8x linear, ~64x quadratic


def test_last_failed_call_with_a_long_command_is_listed_once():
    long = (
        "./scripts/export.sh --output /home/user/projects/some-long-project-name/exports/"
        "session-archive --format jsonl --include-tools --include-system --verbose --retry 3"
    )
    assert len(long) > 160
    s = Span()
    s.user("Export the session and read the docs.")
    s.add("assistant", "Exporting the transcript, then reading the docs.")
    s.call("shell", "Exit code: 0\nOutput:\ntext", command="cat doc0.md")
    s.call("shell", "Exit code: 1\nOutput:\nfatal error", exit_code=1, command=long)
    work = read_span(s.messages).current_work
    assert sum("export.sh" in line for line in work) == 1, work


def test_blank_lines_are_read_in_linear_time():
    """A message of many blank lines holding a space: each pattern anchored at a line start
    with ``\\s*`` rescanned the rest of the run from every line, 8 s for a 16 KB user message."""
    from ctxtool.core.changes import report_names
    from ctxtool.core.span_facts import request_text

    small, large = " \n" * 2000, " \n" * 16000
    for read in (request_text, span_notes.reported, report_names):
        ratio = _best_time(read, large) / _best_time(read, small)
        assert ratio < 24, (read.__name__, ratio)  # 8x the input: ~8x linear, ~64x quadratic
