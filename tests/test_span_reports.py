"""What a span's reports say changed and came of its runs (issue #42 item 3): the files a
tool's "Created …" report or the agent's own closing words name, and the keys a report gives.
Each rule as a plain list, then on a real shared transcript's span."""

from __future__ import annotations

import json
from pathlib import Path

from ctxtool.compaction.summarizers.span_notes import read_span, reported, result_gist
from ctxtool.core.changes import (
    ADDED,
    MODIFIED,
    Change,
    opens_with_report,
    report_names,
    reported_changes,
)
from ctxtool.core.records import Message
from ctxtool.core.span_facts import first_added_line, signals_of
from ctxtool.evaluation.keys import keyed_span, load_key

from .conftest import TRANSCRIPTS

KEYS = Path(__file__).resolve().parent / "answer_keys"


def _span(name: str, tmp_path: Path):
    return keyed_span(load_key(KEYS / f"{name}.json"), TRANSCRIPTS, tmp_path).summarized


# -- plain lists -----------------------------------------------------------------------------


def test_a_list_under_a_heading_that_says_what_it_did_names_its_files():
    report = (
        "Completed.\n\nCreated:\n- Folder: `/u/p/sessions`\n"
        "- JSONL dump (migration-style): `/u/p/sessions/a.jsonl`\n"
        "- HTML file alongside it: `/u/p/sessions/a.html`\n\n"
        "Details:\n- Source copied from: `/u/.codex/x.jsonl`\n"
    )
    assert reported_changes(report) == [
        Change("/u/p/sessions/a.jsonl", ADDED),
        Change("/u/p/sessions/a.html", ADDED),
    ]  # the folder is no file; the list under "Details:" says nothing was made


def test_a_tool_s_report_past_its_first_line_and_an_absolute_path_whole():
    created = (
        "✅ Created and indexed 2 documents:\n🔗 Auto-linked: 2/2 documents\n\n"
        "  • Resources/a-note.md — A Note\n  • Resources/b-note.md — B Note"
    )
    assert [c.path for c in reported_changes(created)] == [
        "Resources/a-note.md",
        "Resources/b-note.md",
    ]
    indexed = "🗄️ notes.db — indexed\nCreated: /home/l/Notes/c-note.md\nTitle: C"
    assert opens_with_report(indexed)
    assert reported_changes(indexed) == [Change("/home/l/Notes/c-note.md", ADDED)]
    assert not opens_with_report("🗄️ 25 documents found for: sqlite\n- [A](Resources/a-note.md)")


def test_the_agent_s_words_name_no_deletion_they_may_mean_from_a_file():
    said = "Removed the unused import from `src/a.py` and updated `README.md`."
    assert reported_changes(said, deletions=False) == [Change("README.md", MODIFIED)]


def test_a_creation_report_s_keys_are_its_names():
    report = "✅ New citation created.\nCitekey: @kistner2025\nAppended to: ref.bib\n"
    assert opens_with_report(report)
    assert reported_changes(report) == [Change("ref.bib", MODIFIED)]
    assert report_names(report) == ["@kistner2025"]  # the file's line is no key


# -- real spans ------------------------------------------------------------------------------


def test_files_a_redacted_shell_made_come_from_the_agent_s_closing_report(tmp_path):
    """Codex export with its calls redacted: the session exports and their rename are known
    only from what the agent reported at the end of each turn."""
    span = _span(
        "codex--20260213134203_redacted_current_codex_session_jsonl_export--sensitive-question",
        tmp_path,
    )
    paths = {c.path for c in signals_of(span).files_changed}
    base = "/Users/jerome/codex_log_viewer/codex_sessions/20260213131852_"
    assert base + "codex_session.jsonl" in paths
    assert base + "browser_native_log_viewer_session.jsonl" in paths


def test_a_custom_tool_s_creation_reports_are_changes_with_their_keys(tmp_path):
    """Pi with PARA note tools: notes made by batch_create_para_docs and create_para_doc, and
    citations appended to ref.bib, each citation's key named, the newest first."""
    changes = {c.path: c for c in signals_of(_span("pi--paradocs-session", tmp_path)).files_changed}
    assert "Resources/when-to-choose-go-htmx-sqlite-for-saas.md" in changes
    assert any(
        p.endswith("when-to-use-client-side-sqlite-with-a-go-backend-for-frontend.md")
        for p in changes
    )
    keys = changes["ref.bib"].added
    assert keys[0] == "@rxdb2024" and "@sqliteconsortium2025" in keys


def test_a_commit_s_line_and_counts_are_its_gist_not_a_file_mode():
    output = (
        "[main 346de6e26] Add session accumulation\n 13 files changed, 1157 insertions(+)\n"
        " create mode 100644 src/a.py\n create mode 100644 tests/unit/test_a.py\n"
    )
    gist = result_gist("git commit -m x", Message(id=2, session_id=1, role="tool", content=output))
    assert gist == "[main 346de6e26] Add session accumulation; 13 files changed, 1157 insertions(+)"


def test_a_commit_before_the_last_call_says_its_hash_and_counts(tmp_path):
    """Claude Code's /erk:plan-implement run: the commit is followed by `erk pr submit` and a
    signal, and the commit's hash and size are what the next agent asks for."""
    span = _span("claude-code--a5c478e1-0d31-46d4-9fd6-3b6b203b3752--before-compaction", tmp_path)
    work = "\n".join(read_span(span).current_work)
    assert "346de6e26" in work and "13 files changed, 1157 insertions(+)" in work
    assert "create mode" not in work


def _call(name: str, **arguments) -> dict:
    function = {"name": name, "arguments": json.dumps(arguments)}
    return {"id": "c1", "type": "function", "function": function}


def test_the_first_line_an_edit_brings_in_is_the_fix():
    patch = (
        "*** Begin Patch\n*** Update File: src/risk.rs\n@@\n-    prop_assert!(matches!(\n"
        "+    // rejected first: the macro cannot take a format string\n"
        "+    let rejected = matches!(\n     risk.evaluate(),\n*** End Patch"
    )
    assert first_added_line(_call("apply_patch", input=patch)) == "let rejected = matches!("
    edit = _call("Edit", file_path="a.py", old_string="x = 1\n}", new_string="x = 1\n}\ntotal = 2")
    assert first_added_line(edit) == "total = 2"  # a line the old text had is no change
    assert first_added_line(_call("Write", file_path="a.py", content="import os\n")) is None


def test_a_failure_fixed_by_a_one_file_edit_says_the_line_it_brought_in(tmp_path):
    """Codex on edgerunner: `cargo clippy` failed on a prop_assert!(matches!(…)) format string;
    the same line passed after the patch to risk.rs that took the match out first."""
    failures = signals_of(_span("codex--edgerunner-codex-session", tmp_path)).failures
    [fixed] = [f for f in failures if "invalid format string" in f.error]
    assert fixed.fixed and fixed.changed_between == ("crates/edgerunner-core/src/risk.rs",)
    assert fixed.changed_code == ("let rejected = matches!(",)


def _tool_run(name: str, arguments: dict, result: str, first_id: int) -> list[Message]:
    call = {"id": f"c{first_id}", "type": "function", "function": {"name": name}}
    call["function"]["arguments"] = json.dumps(arguments)
    return [
        Message(id=first_id, session_id=1, role="assistant", content="", tool_calls=[call]),
        Message(
            id=first_id + 1, session_id=1, role="tool", content=result, tool_call_id=call["id"]
        ),
    ]


def test_a_custom_tool_s_json_record_of_its_failure_is_a_failure_and_its_retry_the_fix():
    refused = json.dumps({"status": "error", "tool": "cron", "error": "invalid cron.add params"})
    messages = [Message(id=1, session_id=1, role="user", content="Schedule the digest at 7:00")]
    messages += _tool_run("cron", {"action": "add"}, refused, 2)
    messages += _tool_run("cron", {"action": "add"}, json.dumps({"ok": True, "id": "j1"}), 4)
    [failure] = signals_of(messages).failures
    assert failure.error == "invalid cron.add params" and failure.fixed
    # a command line's failure is its exit code's to say, not its JSON frame's
    ran = json.dumps({"status": "error", "tool": "exec", "error": "Command exited with code 1"})
    messages = messages[:1] + _tool_run("exec", {"command": "git commit -m x"}, ran, 2)
    assert signals_of(messages).failures == []


def test_openclaw_s_cron_tool_refusing_its_parameters_is_a_failure_fixed_later(tmp_path):
    """Pi (OpenClaw) before its third compaction: the cron tool answered
    {"status": "error", "error": "invalid cron.add params: …"} twice before the job was added."""
    span = _span(
        "pi--openclaw-d27ecd5a-45f9-41a3-bad1-ddef6a3c79fc--before-third-compaction", tmp_path
    )
    refused = [f for f in signals_of(span).failures if f.tool == "cron"]
    assert refused and all("invalid cron.add params" in f.error and f.fixed for f in refused)


def test_a_report_line_with_a_figure_runs_past_the_limit_once():
    report = (
        "Done. Single `index.html` with:\n"
        "- **Min/Max inputs** persisted to `localStorage` (defaults to 1–4 for your group)\n"
        "- **Land** plays `playLand` (C5-E5-G5, 523.25 Hz)\n- `Enter` key shortcut"
    )
    said = reported(report, 100)
    assert said.startswith("Done. Single `index.html` with:; Min/Max inputs persisted to")
    assert "defaults to 1–4 for your group" in said and said.endswith("; […]")
    assert "523.25" not in said  # one line stretches the limit, not two
    assert reported(
        "Done. Wrote `a.py`, `b.py` and `c.py` with the new parser.\n" * 3, 60
    ).endswith("[…]")


def test_an_earlier_request_s_outcome_keeps_the_default_it_reported(tmp_path):
    """Claude Code building a random-number page: the turn's report says the bounds default
    to 1–4 on its second line, after a line that only opens the list."""
    notes = read_span(_span("claude-code--apanloco-random-session", tmp_path))
    assert any("defaults to 1–4" in outcome for outcome in notes.outcomes)


def _changes(*calls: tuple[str, dict]) -> dict:
    messages = [Message(id=1, session_id=1, role="user", content="Build the page")]
    for n, (name, arguments) in enumerate(calls):
        messages += _tool_run(name, arguments, "ok", 2 + 2 * n)
    return {c.path: c for c in signals_of(messages).files_changed}


def test_a_file_s_names_say_what_it_loads_not_its_styles():
    page = (
        '<meta name="viewport" content="width=device-width, initial-scale=1.0">\n'
        '<link href="https://cdn.jsdelivr.net/npm/bootstrap@5.3.2/dist/css/bootstrap.min.css">\n'
        '<script src="https://unpkg.com/vue@3/dist/vue.global.js"></script>\n'
        "<style>body { box-sizing: border-box; } .done { text-decoration: line-through; }</style>\n"
        "<script>function randomInRange(min, max) { return min; }</script>"
    )
    roll = "function randomInRange(min, max) {\n  return crypto.getRandomValues(buf);\n}"
    old = "function randomInRange(min, max) {\n  return min;\n}"
    [page_change] = _changes(
        ("Write", {"file_path": "index.html", "content": page}),
        ("Edit", {"file_path": "index.html", "old_string": old, "new_string": roll}),
    ).values()
    assert page_change.added == ("bootstrap@5.3.2", "vue@3", "randomInRange", "getRandomValues")
    # an insertion into an empty file (no old text) brings its names too
    [empty] = _changes(
        ("Edit", {"file_path": "a.ts", "old_string": "", "new_string": "export const saveTodos"})
    ).values()
    assert empty.added == ("saveTodos",)


def test_the_versions_a_page_loads_are_its_first_names(tmp_path):
    """OpenHands' todo app: index.html loads Vue 3 and Bootstrap 5.3.2 from CDNs, and its
    viewport and stylesheet words are left out."""
    todo = signals_of(_span("openai-chat--OpenHands-basic_gui_mode", tmp_path)).files_changed
    page = next(c for c in todo if c.path.endswith("index.html"))
    assert page.added[:2] == ("vue@3", "bootstrap@5.3.2")
    assert not {"device-width", "initial-scale", "text-decoration"} & set(page.added)


def test_a_document_s_new_headings_are_its_first_names_and_code_comments_are_not():
    doc = "## Usage\n\nRun it.\n\n### Step 5: Upload Planning Session\n\nerk exec push-session\n"
    [md] = _changes(
        (
            "Edit",
            {"file_path": "plan-save.md", "old_string": "## Usage\n\nRun it.\n", "new_string": doc},
        )
    ).values()
    assert md.added == ("Step 5: Upload Planning Session", "push-session")
    [py] = _changes(
        ("Write", {"file_path": "a.py", "content": "# Step one: load it\nload_config()"})
    ).values()
    assert py.added == ("load_config",)


def test_the_heading_an_edit_added_to_a_command_file_is_named(tmp_path):
    """Claude Code's /erk:plan-implement: plan-save.md gained its 'Step 5: Upload Planning
    Session' and pr-address.md its 'Phase 6: Upload Address Session'."""
    span = _span("claude-code--a5c478e1-0d31-46d4-9fd6-3b6b203b3752--mid-implementation", tmp_path)
    changes = {c.path.rsplit("/", 1)[-1]: c for c in signals_of(span).files_changed}
    assert changes["plan-save.md"].added[0] == "Step 5: Upload Planning Session"
    assert changes["pr-address.md"].added[0] == "Phase 6: Upload Address Session"
