"""Issue #42's rules on real shared transcript spans (the tuning keys' spans): outcomes keyed
on their target, where the work stands, what changed, the user's words labelled, the rendering
faults. Each rule also has a plain-list test (tests/test_outcomes.py,
tests/test_changes_and_state.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from ctxtool.compaction.summarizers import ExtractiveSummarizer, SummaryRequest
from ctxtool.core.records import calls_of
from ctxtool.core.sections import is_done, parse_sections
from ctxtool.core.span_facts import signals_of
from ctxtool.core.touched_files import files_touched
from ctxtool.evaluation.keys import keyed_span, load_key

from .conftest import TRANSCRIPTS

KEYS = Path(__file__).parent / "answer_keys"


@pytest.fixture(scope="module")
def spans(tmp_path_factory):
    cache = {}

    def span(name: str):
        if name not in cache:
            key = load_key(KEYS / f"{name}.json")
            cache[name] = keyed_span(key, TRANSCRIPTS, tmp_path_factory.mktemp(name[:30]))
        return cache[name]

    return span


def summary(messages, previous=None, budget=3500) -> str:
    read, modified = files_touched(calls_of(messages))
    files = {"read_files": read, "modified_files": modified}
    request = SummaryRequest(previous, messages, files, max_tokens=budget, min_carry_over=0.9)
    return ExtractiveSummarizer().summarize(request).text


def section(text: str, heading: str) -> list[str]:
    return [i for s in parse_sections(text) if s.heading == heading for i in s.items]


def test_an_edit_refused_before_a_read_is_one_resolved_line(spans):
    """The erk session: three Edits refused with "File has not been read yet", each done after
    a Read. They were three open errors; now one line saying they were fixed."""
    messages = spans("claude-code--a5c478e1-0d31-46d4-9fd6-3b6b203b3752--mid-implementation")
    failures = signals_of(messages.summarized).failures
    refused = [f for f in failures if "has not been read" in f.error]
    assert len(refused) == 3 and all(f.fixed and f.retry for f in refused)
    errors = section(summary(messages.summarized), "Errors and fixes")
    [line] = [e for e in errors if "has not been read" in e]
    assert "(3 times)" in line and "fixed" in line and "still open" not in line


def test_a_type_check_fixed_by_the_same_family_is_not_open(spans):
    """Pi's refactoring session: ``npm run check`` failed, the agent edited, the check passed."""
    messages = spans("pi--before-compaction--first-compaction").summarized
    checks = [f for f in signals_of(messages).failures if "npm run check" in f.command]
    assert checks and all(f.fixed for f in checks)
    assert not [e for e in section(summary(messages), "Errors and fixes") if "still open" in e]


def test_a_deleted_file_says_so(spans):
    """The Codex viewer session deleted viewer.toml (the TOML configuration dropped)."""
    messages = spans("codex--20260213134203_redacted_current_codex_session_jsonl_export")
    changed = section(summary(messages.summarized), "Files changed and why")
    assert any("viewer.toml` (deleted)" in line for line in changed)


def test_a_rejected_option_is_no_decision(spans):
    """Pi: "no, that's horrible." turns the agent's layout down; the user's own layout after
    it is what was decided."""
    messages = spans("pi--before-compaction--second-compaction").summarized
    decisions = [d.text for d in signals_of(messages).decisions]
    assert not any("horrible" in d for d in decisions)
    assert any("core/tools" in d for d in decisions)


def test_the_next_step_after_a_request_reported_done(spans):
    """Pi's theme session ends with the agent reporting the latest request done: the next step
    is no "continue the latest request"."""
    messages = spans("pi--large-session").summarized
    [step] = section(summary(messages), "Next step")[:1]
    assert not step.startswith("Continue the latest request")


def test_files_read_are_never_an_empty_list_with_a_count(spans):
    messages = spans("codex--codex_log_viewer-example").summarized
    read, modified = files_touched(calls_of(messages))
    files = {"read_files": [], "modified_files": modified, "read_files_omitted": 13}
    request = SummaryRequest(None, messages, files, max_tokens=3500)
    text = ExtractiveSummarizer().summarize(request).text
    listed = section(text, "Files read")
    assert listed[0] == "(13 files read; the checkpoint's details list them)"


def test_a_changed_file_in_two_path_forms_is_listed_once(spans):
    """A carried summary named a file relative to the session's directory, the span's own
    edits name it absolute: one item."""
    messages = spans("pi--before-compaction--first-compaction").summarized
    absolute = next(
        c.path for c in signals_of(messages).files_changed if c.path.startswith("/Users/")
    )
    relative = absolute.split("/pi-mono/", 1)[1]
    previous = f"## Files changed and why\n- `{relative}` — carried"
    changed = section(summary(messages, previous), "Files changed and why")
    assert len([line for line in changed if relative in line]) == 1


def test_a_task_carried_out_after_the_list_s_last_update_is_done(spans):
    """The erk session before Claude Code's compaction: the last TodoWrite leaves Phase 10
    'Submit PR' in progress, then `erk pr submit` ran fine. The task is done, not pending."""
    messages = spans("claude-code--a5c478e1-0d31-46d4-9fd6-3b6b203b3752--before-compaction")
    tasks = {t.content: t.status for t in signals_of(messages.summarized).tasks}
    assert tasks["Phase 10: Submit PR"] == "completed"
    text = summary(messages.summarized)
    assert "- [x] Phase 10: Submit PR" in section(text, "Done")
    assert section(text, "Open tasks") == []
    assert "Phase 10" not in "\n".join(section(text, "Next step"))


def test_a_command_whose_json_output_says_it_failed_is_a_failure(spans):
    """The erk session runs its signals under `|| true`, so the exit code is 0: the start
    signal's `{"success": false, "error_type": "session-id-required", …}` and the upload's
    `{"uploaded": false, "reason": "push_session_failed"}` are failures all the same, named
    by their reasons; the upload stays open (another erk command succeeding fixes nothing)."""
    messages = spans("claude-code--a5c478e1-0d31-46d4-9fd6-3b6b203b3752--before-compaction")
    failures = {f.error: f for f in signals_of(messages.summarized).failures}
    upload = failures["push_session_failed"]
    assert "upload-impl-session" in upload.command and not upload.fixed
    assert any(e.startswith("session-id-required | Session ID required") for e in failures)
    errors = section(summary(messages.summarized), "Errors and fixes")
    assert any("push_session_failed" in e and e.endswith("still open") for e in errors)


def test_code_mode_results_without_exit_codes_still_tell_their_failures(spans):
    """EdgeRunner (Codex code mode): `exec` scripts call exec_command and print only "Script
    completed" and the output, never an exit code; a long command's output comes with the
    `wait` on its cell. Its compile errors (E0599, TS2339, a format string), cargo's
    network failure and `cargo fmt --check`'s diff are failures, each fixed later, and the
    summary says so."""
    messages = spans("codex--edgerunner-codex-session").summarized
    failures = signals_of(messages).failures
    errors = [f.error for f in failures]
    assert any("error[E0599]" in e for e in errors)
    assert any("error TS2339" in e for e in errors)
    assert any("invalid format string" in e for e in errors)
    assert any(e.startswith("Diff in ") for e in errors)
    network = [f for f in failures if "failed to get `chrono`" in f.error]
    assert network and network[0].command == "cargo fmt --all && cargo check --workspace"
    assert all(f.fixed for f in failures)
    text = "\n".join(section(summary(messages), "Errors and fixes"))
    assert "ImportMeta" in text and "Send + Sync" in text and "still open" not in text


def test_a_turn_that_ended_with_a_report_is_not_work_under_way(spans):
    """OpenHands' Vue todo app, cut after the agent served it and described it: its turn is
    over, so the app and the calls that made it are done, and the next step waits for the
    user; paradocs, cut after "Committed `5484f07`": the commit is done, not current work."""
    messages = spans("openai-chat--OpenHands-basic_gui_mode--served").summarized
    text = summary(messages)
    assert section(text, "Current work") == []
    assert any(
        "I've created a complete Vue.js todo application" in i for i in section(text, "Done")
    )
    assert "wait for the user's next request" in section(text, "Next step")[0]
    committed = summary(spans("pi--paradocs-session--committed").summarized)
    assert not any("5484f07" in line for line in section(committed, "Current work"))
    assert any("5484f07" in line for line in section(committed, "Done"))


def test_carried_steps_the_span_carried_out_are_done_and_go_first(tmp_path):
    """Pi's refactoring session on top of its first compaction: the carried next steps
    "Create `cli-new.ts` pointing to `main-new.ts`" and "Create
    `src/modes/interactive/interactive-mode.ts` …" were done in the span (both files written):
    they are Done, not earlier work still to do; and at 8k the summary is fitted, not clipped
    (an item trimmed twice in the fit's count once made it overshoot)."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
    import summary_sections

    key = load_key(KEYS / "pi--before-compaction--second-compaction.json")
    span = keyed_span(key, TRANSCRIPTS, tmp_path)
    held = summary_sections._held(tmp_path / f"{key.name}-span.db")
    assert held  # the span carries Pi's first compaction
    text = summary_sections.summary_of(span, held, 3500)
    done = section(text, "Done")
    assert "- [x] Create `cli-new.ts` pointing to `main-new.ts`" in done
    assert any(
        line.startswith("- [x] Create `src/modes/interactive/interactive-mode.ts`") for line in done
    )
    assert not any("cli-new.ts` pointing" in line for line in section(text, "Earlier work"))
    small = summary_sections.summary_of(span, held, 1500)
    assert "(clipped to" not in small and "older items trimmed" in small


def test_at_8k_a_long_list_of_bare_changed_paths_is_folded(spans):
    """EdgeRunner at the 8k budget (1,500 tokens): 35 changed files listed bare, nine of them
    in crates/edgerunner-core/src/. Over budget, they say their directory once, every file
    still named."""
    messages = spans("codex--edgerunner-codex-session").summarized
    read, modified = files_touched(calls_of(messages))
    request = SummaryRequest(None, messages, {"modified_files": modified}, max_tokens=1500)
    text = ExtractiveSummarizer().summarize(request).text
    changed = section(text, "Files changed and why")
    [folded] = [f for f in changed if f.startswith("- `crates/edgerunner-core/src/`:")]
    for name in ("lib.rs", "engine.rs", "replay.rs", "risk.rs"):
        assert f"`{name}`" in folded
    assert not any(f == "- `crates/edgerunner-core/src/lib.rs`" for f in changed)


def test_codex_shell_command_failures_and_their_fixes(spans):
    """The Valdyum Codex session runs ``shell_command`` on Windows: the installer failed under
    WSL's bash and ran through Git Bash; looks failed in the sandbox and ran with
    ``login: false``; ``git status`` failed outside the repository and ran in it. Only the
    transcript export stays open."""
    messages = spans("codex--Valdyum-Labs-codex-session").summarized
    errors = section(summary(messages), "Errors and fixes")
    [curl] = [e for e in errors if "setup.sh" in e]
    assert "still open" not in curl and "Git\\bin\\bash.exe" in curl
    [status] = [e for e in errors if "git status" in e]
    assert "fixed" in status and "AgentForge" in status
    assert any("CreateProcessWithLogonW" in e and "login: false" in e for e in errors)
    [export] = [e for e in errors if "export-session.sh" in e]
    assert export.endswith("still open")
    assert len([e for e in errors if "(then: " in e]) == len(
        {e.split("(then: ")[1] for e in errors if "(then: " in e}
    )


def test_the_calls_at_the_cut_say_what_came_of_them_and_done_ones_are_marked(spans):
    """apanloco: ``git init`` ran, then ``git status`` showed both files untracked and no
    commit: the init is done, the commit is still to do. FundWise: the feature commit ran
    (its hash and count of changes said), so it is done."""
    messages = spans("claude-code--apanloco-random-session").summarized
    work = section(summary(messages), "Current work")
    [init] = [w for w in work if "`git init`" in w]
    [status] = [w for w in work if "git status" in w]
    assert is_done(init) and not is_done(status)
    assert "no commits yet; untracked: LICENSE, index.html" in status
    messages = spans("claude-code--FundWise-claude-session").summarized
    [commit] = [w for w in section(summary(messages), "Current work") if "git commit" in w]
    assert is_done(commit) and "f8e6fe0" in commit and "388 insertions" in commit


def test_custom_tool_failures_are_fixed_by_their_remedy_or_a_later_success(spans):
    """The paradocs Pi session's custom tools say their failures in text: ``fetch_url``'s
    "HTTP fallback failed" (fixed by ``batch_extract_failed``, the remedy the error names) and
    ``resolve_citation``'s "❌ Could not parse" (fixed by the same URL with the authors given).
    Each kind is one line, its other URLs named on it."""
    messages = spans("pi--paradocs-session--committed").summarized
    failures = signals_of(messages).failures
    fetches = [f for f in failures if f.tool == "fetch_url"]
    citations = [f for f in failures if f.tool == "resolve_citation"]
    assert len(fetches) == 6 and all(f.fixed_by == "batch_extract_failed" for f in fetches)
    assert len(citations) == 4 and all(f.fixed for f in citations)
    errors = section(summary(messages), "Errors and fixes")
    [fetch] = [e for e in errors if "fetch_url" in e]
    assert "batch_extract_failed" in fetch and "the same on 5 more" in fetch
    [cite] = [e for e in errors if "resolve_citation" in e]
    assert "Could not parse" in cite and "authors" in cite and "still open" not in cite


def test_a_written_file_names_what_it_holds(spans):
    """OpenHands' Vue todo app: app.js's line names what it was written with (createApp,
    its storage key)."""
    messages = spans("openai-chat--OpenHands-basic_gui_mode").summarized
    changed = section(summary(messages), "Files changed and why")
    [app] = [line for line in changed if "app.js" in line]
    assert "(adds " in app and "`createApp`" in app and "`STORAGE_KEY`" in app


def test_the_calls_at_the_cut_name_what_they_acted_on(spans):
    """paradocs, cut after three fetch_url calls: Current work names the three URLs fetched."""
    messages = spans("pi--paradocs-session").summarized
    work = section(summary(messages), "Current work")
    fetched = [line for line in work if "fetch_url https://" in line]
    assert len(fetched) == 3 and any("lucioduran.com" in line for line in fetched)


def test_a_search_that_missed_is_not_fixed_by_another_search(spans):
    """Pi's large session: ``grep -A 3 "function applyBackgroundToLine" …`` missed its file
    and the next look (``grep -A 3 "class Loader" …``) found what it wanted: an exploratory
    miss, not a failure that grep fixed (the ``3`` after ``-A`` is no shared target)."""
    messages = spans("pi--large-session").summarized
    assert not [f for f in signals_of(messages).failures if "applyBackgroundToLine" in f.command]
