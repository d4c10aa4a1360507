"""What the span's runs say of a failure's outcome beyond their exit codes (#42 item 1): each
rule on a plain list, and on the real shared span it was found on."""

from __future__ import annotations

import json
from pathlib import Path

from ctxtool.core.outcomes import Run, outcomes, repeats_error
from ctxtool.core.records import Message
from ctxtool.core.sections import DECISIONS, ERRORS, NEXT_STEP, OPEN_TASKS
from ctxtool.core.span_facts import (
    _WARNINGS,
    Request,
    _same_file,
    agent_choices,
    answered_question,
    checklist_left,
    in_reply,
    left_in_code,
    planned_steps_left,
    rejected_calls,
    signals_of,
)
from ctxtool.core.work_state import changed_named_file, planned_steps, request_steps, steps_left

from .keyed_spans import extractive_summary, keyed_span_named, section

YARN = 'This project is configured to use yarn because /home/a/package.json has a "packageManager" field'


def _bash(command: str, failed: bool = False, error: str = "", output: str = "") -> Run:
    return Run("Bash", command, failed, error=error, output=output)


def test_a_success_that_prints_the_error_again_fixes_nothing():
    runs = [
        _bash("pnpm --version 2>&1", True, YARN),
        _bash("~/.nvm/bin/pnpm --version 2>&1 | head -5", output=YARN + "\n"),
        _bash("COREPACK_ENABLE_PROJECT_SPEC=0 pnpm --version 2>&1 | tail -3", output="10.33.2\n"),
    ]
    [failure] = outcomes(runs)
    assert failure.fixed_by == runs[2]
    assert repeats_error("npm error code 2 | " + YARN, "…\n" + YARN)
    assert not repeats_error("exit code 1", "exit code 1")  # too short to be the error
    assert not repeats_error(YARN, "10.33.2")


def test_zerion_span_s_pnpm_failure_is_fixed_by_the_env_prefix(tmp_path: Path):
    span = keyed_span_named("claude-code--FundWise-claude-session--zerion-before-build", tmp_path)
    [pnpm] = [
        f for f in signals_of(span.summarized).failures if "configured to use yarn" in f.error
    ]
    assert pnpm.fixed and (pnpm.fixed_by or "").startswith("COREPACK_ENABLE_PROJECT_SPEC=0 pnpm")


OPTIONS = "您希望我：\n1. 先解决origin仓库的冲突？\n2. 还是保持现状，只确保backup仓库的每日备份？"


def test_a_short_reply_says_the_question_or_the_option_it_answers():
    asked = "We only have one `link` style. Should I add a `mdLinkUrl` token for the URL?"
    assert answered_question("yes, in old pi link url as 666666", asked) == (
        "Should I add a `mdLinkUrl` token for the URL?"
    )
    earlier = "Plan:\n1. **Keep both**\n2. **Merge origin**\n\n" + OPTIONS
    assert answered_question("选 2", earlier) == "还是保持现状，只确保backup仓库的每日备份？"
    assert answered_question("option 1", OPTIONS) == "先解决origin仓库的冲突？"
    assert answered_question("选 3", OPTIONS) is None  # no such option, and no yes/no answer
    assert answered_question("yes", "Done: the tests pass.") is None  # nothing was asked
    assert answered_question("can you add a LICENSE file?", asked) is None  # a new request
    assert answered_question("yes " + "x" * 100, asked) is None  # a request of its own
    assert in_reply(Request(1, "选 2", "还是保持现状？")) == "选 2 (in reply to: 还是保持现状？)"


def test_md_link_url_span_s_latest_reply_names_the_token_it_agrees_to(tmp_path: Path):
    span = keyed_span_named("pi--large-session--md-link-url", tmp_path)
    latest = signals_of(span.summarized).latest_request
    assert latest is not None and latest.text.startswith("yes, in old pi link url")
    assert "mdLinkUrl" in (latest.answers or "")
    [step] = section(extractive_summary(span), NEXT_STEP)
    assert "mdLinkUrl" in step


def test_openclaw_span_s_pick_by_number_names_the_option(tmp_path: Path):
    name = "pi--openclaw-d27ecd5a-45f9-41a3-bad1-ddef6a3c79fc--before-third-compaction"
    span = keyed_span_named(name, tmp_path)
    [pick] = [r for r in signals_of(span.summarized).requests if r.text == "选 2"]
    assert pick.answers is not None and "保持现状" in pick.answers


def test_the_steps_an_agent_plans_after_then():
    said = [
        "I'll rename the files to `viewer` and update the docs, then run a quick syntax check.",
        "Now run the smoke test, then `pnpm build`:",  # no one says what they will do
        "The build passed, then the tests ran.",  # a report, no plan
    ]
    assert planned_steps(said) == ["run a quick syntax check"]
    assert planned_steps(["Let me read it first, and then I'll patch `cli.ts`."]) == [
        "patch `cli.ts`"
    ]


def test_mid_rename_span_s_next_step_keeps_the_planned_syntax_check(tmp_path: Path):
    name = "codex--20260213134203_redacted_current_codex_session_jsonl_export--mid-rename"
    span = keyed_span_named(name, tmp_path)
    assert planned_steps_left(span.summarized) == ["run a quick syntax check again"]
    steps = section(extractive_summary(span), NEXT_STEP)
    assert any("as the agent planned: run a quick syntax check again" in s for s in steps)
    # a plan the agent went on past is no step left (FundWise built FW-005 it planned)
    other = keyed_span_named("claude-code--FundWise-claude-session--zerion-before-build", tmp_path)
    assert planned_steps_left(other.summarized) == []


def test_a_warning_a_later_edit_of_its_file_removed_is_a_fix_worth_keeping():
    assert _same_file("../coding-agent/src/cli.ts", "/w/pi/packages/coding-agent/src/cli.ts")
    assert _same_file("crates/svc/src/main.rs", "crates/svc/src/main.rs")
    assert not _same_file("src/main.rs", "/w/other/lib.rs")
    rust = "warning: unused imports: `A` and `B`\n  --> crates/svc/src/main.rs:10:5\n"
    biome = "packages/app/src/cli/args.ts:8:52 lint/correctness/noUnusedImports  FIXABLE\n"
    assert [p.search(rust) is not None for p in _WARNINGS] == [True, False, False, False]
    assert _WARNINGS[2].search(biome).group("path") == "packages/app/src/cli/args.ts"


def test_edgerunner_span_s_unused_imports_warning_patched_but_not_rerun_is_not_called_fixed(
    tmp_path: Path,
):
    # The patch of main.rs came after the last `cargo check` printing it, but nothing ran
    # after the patch: the warning is not known to be gone (``_warnings_fixed``).
    span = keyed_span_named("codex--edgerunner-codex-session--backend-only", tmp_path)
    assert [f for f in signals_of(span.summarized).failures if f.warning] == []
    assert not any(
        "→ failed" in i and "cargo check" in i for i in extractive_summary(span).splitlines()
    )


def test_a_prose_request_s_asks_joined_by_and_are_its_steps():
    ask = (
        "when done, remove the old files (main.ts, cli.ts right? nothing else), and add a code"
        " map to AGENTS.md, and a DEVELOPMENT.md that README.md links to."
    )
    steps = request_steps(ask)
    assert steps == [
        "when done, remove the old files (main.ts, cli.ts right? nothing else)",
        "add a code map to AGENTS.md",
        "a DEVELOPMENT.md that README.md links to",
    ]
    assert request_steps("fix the bug, and add a test") == []  # one "and": no list of asks
    changed = ["/w/src/main.ts", "/w/src/tui/tui.ts"]
    assert changed_named_file(steps[0], changed)
    assert not changed_named_file(steps[1], changed)
    assert steps_left(steps, [], [], changed) == steps[1:]


def test_old_files_removed_span_s_next_step_lists_the_docs_still_to_write(tmp_path: Path):
    span = keyed_span_named("pi--before-compaction--old-files-removed", tmp_path)
    steps = section(extractive_summary(span), NEXT_STEP)
    [left] = [s for s in steps if s.startswith("- Steps of the latest request not yet done")]
    assert "add a code map to AGENTS.md" in left and "DEVELOPMENT.md" in left
    assert "remove the old remaining files" not in left  # rm main.ts cli.ts did it


def _write(i: int, path: str, content: str) -> list[Message]:
    call = {"id": f"c{i}", "type": "function",
            "function": {"name": "write", "arguments": json.dumps({"path": path, "content": content})}}  # fmt: skip
    return [
        Message(i, 1, "assistant", None, tool_calls=[call]),
        Message(i + 1, 1, "tool", "ok", tool_call_id=f"c{i}"),
    ]


def test_the_unchecked_items_of_a_checklist_the_turn_wrote_are_left_open():
    memory = "# Today\n- [x] Create the workspace\n- [ ] Define the identity\n- [ ] Fill TOOLS.md\n"
    turn = [Message(1, 1, "user", "Create the DX workspace")] + _write(2, "mem/today.md", memory)
    assert checklist_left(turn) == ["Define the identity", "Fill TOOLS.md"]
    # written again after: its list is the later write's
    assert checklist_left(turn + _write(4, "mem/today.md", "- [x] all done\n")) == []
    # a list written before the latest request belongs to earlier work
    assert checklist_left(turn + [Message(9, 1, "user", "Now do something else")]) == []


def test_openclaw_span_s_memory_checklist_is_open_work(tmp_path: Path):
    name = "pi--openclaw-d27ecd5a-45f9-41a3-bad1-ddef6a3c79fc--before-third-compaction"
    span = keyed_span_named(name, tmp_path)
    assert "与用户对话，定义DX3906身份" in checklist_left(span.summarized)
    tasks = section(extractive_summary(span), OPEN_TASKS)
    assert any("定义DX3906身份" in t for t in tasks)


def _edit(i: int, path: str, old: str, new: str) -> list[Message]:
    arguments = {"file_path": path, "old_string": old, "new_string": new}
    call = {"id": f"c{i}", "type": "function",
            "function": {"name": "Edit", "arguments": json.dumps(arguments)}}  # fmt: skip
    return [
        Message(i, 1, "assistant", None, tool_calls=[call]),
        Message(i + 1, 1, "tool", "ok", tool_call_id=f"c{i}"),
    ]


def test_what_the_code_written_leaves_for_later_is_open_work():
    code = (
        "// Replace with your deployed program ID after `anchor deploy`\n"
        'export const PROGRAM_ID = "Bhvn111";\n'
        "<!-- Todo list -->\n"  # a heading, no to-do
        "# TODO: retry on 429\n"
    )
    written = _write(1, "src/constants.ts", code)
    assert left_in_code(written) == [
        ("src/constants.ts", "Replace with your deployed program ID after `anchor deploy`"),
        ("src/constants.ts", "TODO: retry on 429"),
    ]
    fixed = _edit(3, "src/constants.ts", "# TODO: retry on 429\n", "retry(429)\n")
    assert left_in_code(written + fixed) == [
        ("src/constants.ts", "Replace with your deployed program ID after `anchor deploy`")
    ]


def test_wiring_span_s_open_tasks_say_the_program_id_to_replace(tmp_path: Path):
    span = keyed_span_named("claude-code--bhavana-claude-session--wiring-frontend", tmp_path)
    tasks = section(extractive_summary(span), OPEN_TASKS)
    assert any("constants.ts`: Replace with your deployed program ID" in t for t in tasks)


def test_a_step_that_opens_with_the_file_it_makes_is_done_once_written():
    changed = ["/home/u/app/src/lib/constants.ts"]
    assert changed_named_file("2. lib/constants.ts — PROGRAM_ID, RPC endpoint", changed)
    assert not changed_named_file("3. hooks/useProperties.ts — fetch all PDAs", changed)


def test_wiring_span_s_next_step_lists_no_file_it_wrote(tmp_path: Path):
    span = keyed_span_named("claude-code--bhavana-claude-session--wiring-frontend", tmp_path)
    steps = " ".join(section(extractive_summary(span), NEXT_STEP))
    assert "lib/program.ts — getProgram()" not in steps  # written: done, not to do


def test_the_calls_the_user_refused_are_said_with_what_they_were_for():
    call = {"id": "c1", "type": "function",
            "function": {"name": "WebFetch", "arguments": json.dumps({"url": "https://www.landx.id"})}}  # fmt: skip
    refused = "The user doesn't want to proceed with this tool use. The tool use was rejected."
    turn = [
        Message(1, 1, "user", "Research the market"),
        Message(2, 1, "assistant", None, tool_calls=[call]),
        Message(3, 1, "tool", refused, tool_call_id="c1"),
    ]
    assert rejected_calls(turn) == [("WebFetch", "www.landx.id")]
    stopped = [*turn[:2], Message(3, 1, "tool", "Command aborted", tool_call_id="c1")]
    assert rejected_calls(stopped) == []  # stopped, not refused


def test_wiring_span_s_errors_say_the_user_rejected_the_web_fetches(tmp_path: Path):
    span = keyed_span_named("claude-code--bhavana-claude-session--wiring-frontend", tmp_path)
    [line] = [e for e in section(extractive_summary(span), ERRORS) if "rejected" in e]
    assert line.startswith("- WebFetch rejected by the user (2 times): ") and "landx.id" in line


def test_a_way_the_agent_chose_with_its_reason_is_a_decision():
    said = [
        Message(1, 1, "user", "Build a TODO app"),
        Message(
            2,
            1,
            "assistant",
            "No commands found. Since no custom commands are available, I'll split the work"
            " into parallel subtasks. I'll run the tests now.",  # no reason: no choice
        ),
        Message(
            3, 1, "assistant", "I'll try the installer with approval since it runs a remote script."
        ),
    ]
    assert agent_choices(said) == [
        "Since no custom commands are available, I'll split the work into parallel subtasks.",
        "I'll try the installer with approval since it runs a remote script.",
    ]
    assert agent_choices(said[:1]) == []


def test_fe5e1c67_span_s_decisions_say_why_the_agent_split_the_work(tmp_path: Path):
    span = keyed_span_named("claude-code--fe5e1c67-53e7-4862-81ae-d0e013e3270b", tmp_path)
    decisions = section(extractive_summary(span), DECISIONS)
    assert any(
        d.startswith("- (the agent) Since no custom commands are available") for d in decisions
    )
