"""What the agent found along the way (span_notes.findings_along_the_way) leaves out what is
no finding: the redaction's placeholder, an intention after a semicolon, a plan's items, and
a list's next number glued to a sentence; and a fix's one line keeps the directories of files that share a name (found by the session's review)."""

from __future__ import annotations

from ctxtool.compaction.summarizers.span_notes import findings_along_the_way
from tests.test_span_facts import Span


def _findings(*said: str) -> list[str]:
    s = Span()
    s.user("Look into the store.")
    for text in said:
        s.add("assistant", text)
        s.call("shell", "Exit code: 0\nOutput:\nok", command="ls")
    s.add("assistant", "Done.")
    return findings_along_the_way(s.messages)


def test_a_redaction_placeholder_is_no_finding():
    assert _findings("[REDACTED_TEXT len=212 sha=ab12cd34]") == []


def test_an_intention_after_a_semicolon_is_no_finding():
    assert _findings("I have enough context; I'm now creating the config in config.toml.") == []


def test_a_plans_items_without_figures_are_no_findings_and_numbers_stay_with_their_item():
    found = _findings(
        "The module has two duplicates:\n"
        "1. Remove executeBashCommand - use `session.executeBash()`\n"
        "2. The parser in parse.ts is 907 lines long\n"
        "3. Keep the old API"
    )
    assert found == ["The parser in parse.ts is 907 lines long"], found


def test_chinese_sentences_end_at_their_full_stops():
    found = _findings("问题找到了！大文件lancedb.node有143.94 MB。现在让我检查一下工作空间。")
    assert "大文件lancedb.node有143.94 MB。" in found, found
    assert not any("让我" in f for f in found), found


def test_a_fix_s_files_that_share_a_name_keep_their_directories():
    from ctxtool.compaction.summarizers.extractive import fix_gist

    item = (
        "- `cargo check` failed: error[E0432]: unresolved import `foo` in crate b — fixed: "
        "`cargo check` succeeded after changing crates/a/src/lib.rs, crates/b/src/lib.rs, "
        "crates/b/src/util.rs (`use crate::foo;`) " + "x" * 300
    )
    gist = fix_gist(item)
    assert "crates/a/src/lib.rs, crates/b/src/lib.rs, util.rs" in gist, gist


def test_a_report_said_whole_keeps_its_order():
    from ctxtool.compaction.summarizers.span_notes import reported

    report = "I set up the project with:\n- a Next.js app\n- `src/store.ts` for the state"
    assert reported(report, 900).index("Next.js") < reported(report, 900).index("store.ts")
    # cut short, the line quoting a path goes first
    assert reported(report, 30).startswith("`src/store.ts`"), reported(report, 30)
