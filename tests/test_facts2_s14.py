"""OpenClaw's shell tool ``exec`` says its failures in two ways the outcome rule now reads
(issue #42 item 1): a JSON record ``{"status": "error", …}`` as its result, and a later notice
"Exec failed (<session>, code N) :: <output>" for a command left running. Both are failures
keyed on their target, fixed by a later success on it, else open; an open failure is one
short line when the budget is short. Each rule on a plain list, then on a real span."""

from __future__ import annotations

import json

import pytest

from ctxtool.compaction.summarizers.extractive import ERRORS, open_gist
from ctxtool.core.records import Message
from ctxtool.core.span_facts import signals_of

from .keyed_spans import extractive_summary, keyed_span_named, section

OPENCLAW = "pi--openclaw-d27ecd5a-45f9-41a3-bad1-ddef6a3c79fc"
BEFORE_THIRD = OPENCLAW + "--before-third-compaction"


@pytest.fixture(scope="module")
def span(tmp_path_factory):
    def load(name: str):
        return keyed_span_named(name, tmp_path_factory.mktemp(name[:30]))

    return load


def _exec(command: str, result: str, first_id: int) -> list[Message]:
    call = {"id": f"c{first_id}", "type": "function", "function": {"name": "exec"}}
    call["function"]["arguments"] = json.dumps({"command": command})
    return [
        Message(id=first_id, session_id=1, role="assistant", content="", tool_calls=[call]),
        Message(
            id=first_id + 1, session_id=1, role="tool", content=result, tool_call_id=call["id"]
        ),
    ]


def _record(error: str) -> str:
    return json.dumps({"status": "error", "tool": "exec", "error": error}, indent=2)


PARSER_ERROR = (
    "\ufffd\ufffd\ufffd\ufffd\ufffd\ufffd 1\r\n+ cd C:\\w && git status\r\n+      ~~\r\n"
    "    + CategoryInfo          : ParserError: (:) [], ParentContainsErrorRecordException\r\n"
    "    + FullyQualifiedErrorId : InvalidEndOfLine\n\nCommand exited with code 1"
)


# -- plain lists -----------------------------------------------------------------------------


def test_a_status_error_record_is_a_failure_its_target_s_success_the_fix():
    messages = [Message(id=1, session_id=1, role="user", content="Check the repo")]
    messages += _exec("cd C:\\w && git status", _record(PARSER_ERROR), 2)
    messages += _exec("cd C:\\w; git status", "On branch master", 4)
    messages += _exec("powershell -File scripts\\b.ps1", _record(PARSER_ERROR), 6)
    fixed, still = signals_of(messages).failures
    # PowerShell's own name of the error, not its unreadable lines nor the exit code
    assert fixed.error == "PowerShell error InvalidEndOfLine"
    assert fixed.fixed and "git status" in (fixed.fixed_by or "")
    assert still.command == "powershell -File scripts\\b.ps1" and not still.fixed
    # a record that says it completed is no failure
    ok = json.dumps({"status": "completed", "exitCode": 0, "aggregated": "ok"})
    assert signals_of(messages[:1] + _exec("git status", ok, 2)).failures == []


def _notice(session: str, code: int, output: str) -> Message:
    text = (
        f"System: [2026-03-06 21:33:37 GMT+8] Exec failed ({session}, code {code}) :: {output}"
        "\n\n[Fri 2026-03-06 21:34 GMT+8] 选 2"
    )
    return Message(id=20, session_id=1, role="user", content=text)


def test_a_notice_of_a_background_command_s_end_is_that_command_s_result():
    running = "Command still running (session rapid-cove, pid 1). Use process for follow-up."
    output = "From https://x/backup * branch master -> FETCH_HEAD fatal: refusing to merge unrelated histories"
    messages = [Message(id=1, session_id=1, role="user", content="Back it up")]
    messages += _exec("git pull backup master", running, 2)
    started = list(messages)
    messages.append(_notice("rapid-co", 1, output))
    [failure] = signals_of(messages).failures
    assert failure.command == "git pull backup master" and not failure.fixed
    # the output's lines, run together by the notice, are read apart: the fatal one is the error
    assert failure.error == "fatal: refusing to merge unrelated histories"
    messages += _exec("git pull backup master --allow-unrelated-histories", "Merge made", 21)
    [failure] = signals_of(messages).failures
    assert failure.fixed and "--allow-unrelated-histories" in (failure.fixed_by or "")
    # still running and no notice: no outcome yet; a notice naming another session: none
    assert signals_of(started).failures == []
    assert signals_of(started + [_notice("dawn-hav", 1, output)]).failures == []


def test_an_open_failure_s_gist_is_its_command_and_error_still_open():
    item = (
        "- `git push backup master` failed: remote: error: GH001: Large files detected. "
        "You may want to try Git Large File Storage - https://git-lfs.github.com. "
        "(then: 我明白了！有两个问题需要解决) — still open (the same on 1 more: git push x)"
    )
    short = open_gist(item)
    assert short.startswith("- `git push backup master` failed: remote: error: GH001")
    assert short.endswith("— still open (the same on 1 more)") and "(then:" not in short
    fixed = "- `make` failed: error X (then: I'll fix it) — fixed: `make` succeeded"
    assert open_gist(fixed) == fixed  # a fixed failure has its own gist


# -- real transcripts ------------------------------------------------------------------------


def test_openclaw_s_ampersand_fixed_and_its_backup_script_open(span):
    """The span after the third compaction: '&&' refused by PowerShell (InvalidEndOfLine),
    then the same line with ';'; the span ends on backup-large-files.ps1 failing to parse."""
    failures = signals_of(span(OPENCLAW).summarized).failures
    ampersand = [f for f in failures if "&& git status" in f.command]
    assert ampersand and all(f.error == "PowerShell error InvalidEndOfLine" for f in ampersand)
    assert ampersand[-1].fixed and "; git status" in (ampersand[-1].fixed_by or "")
    script = [f for f in failures if "backup-large-files.ps1" in f.command]
    assert script and not script[-1].fixed


def test_openclaw_s_pull_fixed_by_unrelated_histories_and_the_large_file_push_open(span):
    """Before the third compaction: 'git pull backup master' and 'git push backup master' ran
    on in the background; notices said the pull refused unrelated histories (fixed by
    --allow-unrelated-histories) and the push was rejected for GH001 (never pushed since)."""
    keyed = span(BEFORE_THIRD)
    failures = signals_of(keyed.summarized).failures
    pull = [f for f in failures if f.command == "git pull backup master"]
    assert pull and "unrelated histories" in pull[0].error and pull[0].fixed
    assert "--allow-unrelated-histories" in (pull[0].fixed_by or "")
    push = [f for f in failures if "GH001" in f.error]
    assert push and push[0].command == "git push backup master" and not push[0].fixed
    # at a short budget the open push stays, one short line
    errors = section(extractive_summary(keyed, 2000), ERRORS)
    line = [i for i in errors if "GH001" in i]
    assert line and line[0].endswith("still open") and "(then:" not in line[0]
