"""Cases a review found where span facts stated wrong state: each rule on a plain list."""

from __future__ import annotations

import time

from ctxtool.compaction.summarizers.span_notes import read_span
from ctxtool.core.span_facts import _failures

from .test_span_facts import Span

WARN = (
    "warning: unused import: `HashMap`\n --> src/main.rs:3:5\n  |\n"
    "3 | use std::collections::HashMap;\n\n"
    'warning: `app` (bin "app") generated 1 warning\n    Finished dev [unoptimized] target(s)\n'
)


def _warned(span: Span) -> list:
    return [f for f in _failures(span.messages) if f.warning]


def test_a_warning_is_fixed_only_when_a_later_run_of_the_program_no_longer_prints_it():
    edit = {"file_path": "src/main.rs", "old_string": "fn main() {", "new_string": "fn main() {}"}
    printed_again = Span()
    printed_again.user("add a --verbose flag to the CLI")
    printed_again.call("Bash", WARN, exit_code=0, command="cargo check")
    printed_again.call("Edit", "ok", **edit)
    printed_again.call("Bash", WARN, exit_code=0, command="cargo check")
    assert _warned(printed_again) == []
    not_rerun = Span()
    not_rerun.user("add a --verbose flag")
    not_rerun.call("Bash", WARN, exit_code=0, command="cargo check")
    not_rerun.call("Edit", "ok", **edit)
    assert _warned(not_rerun) == []
    cut = Span()
    cut.user("go")
    cut.call("Bash", WARN, exit_code=0, command="cargo check")
    cut.call("Edit", "ok", **edit)
    cut.call("Bash", "    Finished dev\n", exit_code=0, command="cargo check 2>&1 | tail -2")
    assert _warned(cut) == []
    gone = Span()
    gone.user("go")
    gone.call("Bash", WARN, exit_code=0, command="cargo check")
    gone.call("Edit", "ok", **edit)
    gone.call("Bash", "    Finished dev\n", exit_code=0, command="cargo check")
    [fixed] = _warned(gone)
    assert fixed.fixed and "unused import" in fixed.error


def test_a_run_that_printed_a_warning_is_not_shown_failed_nor_given_a_then():
    span = Span()
    span.user("tidy the build")
    span.call("Bash", WARN, exit_code=0, command="cargo check")
    span.add("assistant", "I'll drop the unused import in src/main.rs now.")
    span.call("Edit", "ok", file_path="src/main.rs", old_string="use x;", new_string="")
    span.call("Bash", "    Finished dev\n", exit_code=0, command="cargo check")
    assert [f.warning for f in _failures(span.messages)] == [True]
    notes = read_span(span.messages)
    assert not any("→ failed" in line for line in notes.current_work)
    assert not any("warned" in line and "(then:" in line for line in notes.errors)


def test_many_warnings_over_many_runs_are_judged_in_linear_time():
    out = "".join(f"warning: unused import: `M{j}`\n --> src/m{j}.rs:3:5\n\n" for j in range(150))
    span = Span()
    span.user("make it build cleanly")
    for i in range(375):
        span.call("Bash", out + "    Finished dev\n", exit_code=0, command="cargo check")
        span.call(
            "Edit", "ok", file_path=f"src/m{(i * 7) % 300}.rs", old_string="a", new_string="b"
        )
    start = time.process_time()
    assert _warned(span) == []  # each warning printed again after its last edit
    assert time.process_time() - start < 3
