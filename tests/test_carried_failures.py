"""A failure an earlier summary carried as "still open" is retired once a run of its command
succeeds in the next span, whoever ran it (the agent's tool call or the user's own ``$ cmd``)
and whatever secret the command holds (the summary shows it masked): the extractive summary
moves it to Done as fixed, and the LLM summarizer is told so with the span."""

from __future__ import annotations

import json
from pathlib import Path

from ctxtool.compaction.summarizers import ExtractiveSummarizer
from ctxtool.compaction.summarizers.base import SummaryRequest
from ctxtool.compaction.summarizers.prompt import build_prompt
from ctxtool.compaction.summarizers.span_notes import FIXED, STILL_OPEN, read_span
from ctxtool.core.records import Message
from ctxtool.core.sections import parse_sections
from ctxtool.db import create_engine
from ctxtool.store import Store

from .builders import LIMITS
from .compacting import compact_with_llm
from .llm_server import FakeLLM

TEST_FAILURE = "- `npm test` failed: FAIL test/cart.test.ts › total rounds to cents"
TOKEN = "ghp_" + "Zq9Xw8Vu7Ts6Rq5Po4Nm3Lk2Jh1Gf0EdCbA"  # a GitHub token's shape
CURL = f"curl -fsS -H 'Authorization: token {TOKEN}' https://api.github.com/repos/o/r"


def msg(i, role, content=None, **kw):
    return Message(i, 1, role, content, **kw)


def bash(i, command, output, exit_code):
    """The agent's bash call and its result."""
    call = {
        "id": f"c{i}",
        "type": "function",
        "function": {"name": "bash", "arguments": json.dumps({"command": command})},
    }
    return [
        msg(i, "assistant", None, tool_calls=[call]),
        msg(i + 1, "tool", output, tool_call_id=f"c{i}", details={"exit_code": exit_code}),
    ]


def user_ran(i, command, output, exit_code):
    """A command the user ran in Pi (``$ cmd``), stored as Pi's import stores it."""
    details = {"source_role": "bashExecution", "exit_code": exit_code}
    return msg(i, "user", f"$ {command}\n{output}", details=details)


def summarize(previous, messages):
    request = SummaryRequest(previous, messages, {}, max_tokens=4096)
    return ExtractiveSummarizer().summarize(request).text


def items(text, heading):
    found = {s.heading: s.items for s in parse_sections(text)}.get(heading, [])
    return [i for i in found if i.startswith("- ")]


def test_the_one_rule_for_how_a_failure_ends_is_what_the_summary_writes():
    """span_notes writes the outcome of a failure the span saw; the extractive summary retires
    a carried one with the same words."""
    open_span = [msg(1, "user", "Make the tests pass."), *bash(2, "npm test", "FAIL x", 1)]
    [line] = read_span(open_span).errors
    assert line.endswith(STILL_OPEN) and line.startswith("`npm test` failed:")
    fixed_span = open_span + bash(4, "npm test", "ok", 0)
    [line] = read_span(fixed_span).errors
    assert line.endswith(FIXED)


def test_a_carried_failure_is_fixed_when_the_user_reran_the_command():
    """The user, not the agent, ran ``$ npm test`` and it passed: the failure the previous
    summary carried as still open is now under Done as fixed, no longer under Errors."""
    previous = (
        f"## Goal\nMake the cart tests pass.\n\n## Errors and fixes\n{TEST_FAILURE}{STILL_OPEN}"
    )
    messages = [
        msg(1, "user", "I fixed the rounding myself, checking now."),
        user_ran(2, "npm test", "Tests: 12 passed, 12 total", 0),
        msg(3, "user", "Now add a changelog entry."),
        msg(4, "assistant", "Adding the changelog entry."),
    ]
    out = summarize(previous, messages)
    assert not any("npm test" in e for e in items(out, "Errors and fixes")), out
    assert f"{TEST_FAILURE}{FIXED}" in items(out, "Done")


def test_a_failure_another_writer_carried_as_open_is_retired_too():
    """An LLM's summary dashes its outcome its own way; the command in backticks is enough."""
    previous = "## Errors and fixes\n- `npm test`: FAIL test/cart.test.ts - Still open."
    out = summarize(previous, [msg(1, "user", "Checking."), user_ran(2, "npm test", "ok", 0)])
    assert items(out, "Done") == [f"- `npm test`: FAIL test/cart.test.ts{FIXED}"]
    assert items(out, "Errors and fixes") == []


def test_a_failed_rerun_by_the_user_leaves_it_open():
    previous = (
        f"## Goal\nMake the cart tests pass.\n\n## Errors and fixes\n{TEST_FAILURE}{STILL_OPEN}"
    )
    messages = [
        msg(1, "user", "Still broken?"),
        user_ran(2, "npm test", "Tests: 1 failed, 11 passed", 1),
        msg(3, "assistant", "Yes, the rounding test still fails."),
    ]
    out = summarize(previous, messages)
    assert f"{TEST_FAILURE}{STILL_OPEN}" in items(out, "Errors and fixes")
    assert not any("npm test" in d for d in items(out, "Done"))


def test_a_failure_whose_command_holds_a_secret_is_fixed_by_its_rerun():
    """The first checkpoint shows the command masked; the rerun in the next span is the same
    command with the token: the two are compared on the masked form."""
    first = summarize(
        None,
        [msg(1, "user", "Fetch the repo's metadata."), *bash(2, CURL, "curl: (22) 401", 22)],
    )
    [failure] = items(first, "Errors and fixes")
    assert failure.endswith(STILL_OPEN) and TOKEN not in failure and "[redacted]" in failure
    second = summarize(
        first,
        [msg(1, "user", "The token is renewed, try again."), *bash(2, CURL, '{"id": 1}', 0)],
    )
    assert not any("curl" in e for e in items(second, "Errors and fixes")), second
    assert failure.removesuffix(STILL_OPEN) + FIXED in items(second, "Done")
    assert TOKEN not in second


def test_a_long_command_is_masked_before_it_is_shortened():
    """A secret the shortening would cut in two (a command of one long word is cut at the
    limit) is masked whole first: no part of it is shown, and the shortened command is the
    same form a rerun is compared in."""
    url = f"https://api.example.com/{'a/' * 60}?x={TOKEN}"  # the token straddles the cut
    first = summarize(None, [msg(1, "user", "Fetch it."), *bash(2, url, "401", 22)])
    [failure] = items(first, "Errors and fixes")
    assert "(shortened)" not in failure and "?x=[redacted]`" in failure  # fits, masked
    assert "ghp_" not in first and TOKEN[4:9] not in first
    second = summarize(first, [msg(1, "user", "Again."), *bash(2, url, "200", 0)])
    assert failure.removesuffix(STILL_OPEN) + FIXED in items(second, "Done")
    longer = url.replace("?x=", "xxxx?x=")  # the mask itself straddles the cut: kept whole
    out = summarize(None, [msg(1, "user", "Fetch it."), *bash(2, longer, "401", 22)])
    [failure] = items(out, "Errors and fixes")
    assert "xxxx?x=[redacted]` (shortened) failed" in failure and "ghp_" not in out


def test_the_llm_is_told_which_carried_failures_the_span_fixed():
    """The prompt names the carried failure a user's run fixed, and shows that run as the
    user's shell command (not as context the runtime injected)."""
    previous = (
        f"## Goal\nMake the cart tests pass.\n\n## Errors and fixes\n{TEST_FAILURE}{STILL_OPEN}"
    )
    messages = [msg(1, "user", "Checking now."), user_ran(2, "npm test", "12 passed", 0)]
    prompt = build_prompt(SummaryRequest(previous, messages, {}))
    assert "<fixed-since-previous-summary>\n- `npm test`\n</fixed-since-previous-summary>" in prompt
    assert "[User ran a shell command]: $ npm test\n12 passed" in prompt
    unfixed = build_prompt(SummaryRequest(previous, messages[:1], {}))
    assert "<fixed-since-previous-summary>" not in unfixed


# -- end to end: a Pi session imported and compacted twice through `ctxtool` ------------------


def _pi_line(message: dict) -> str:
    return json.dumps({"type": "message", "timestamp": "2026-01-01T00:00:00Z", "message": message})


def _padding(turns: int, tag: str) -> list[str]:
    """Turns of reading files: enough tokens that the commands before them are summarized."""
    lines = []
    for t in range(turns):
        lines.append(_pi_line({"role": "user", "content": f"{tag} {t}: read src/m{t}.ts " * 6}))
        call = {"type": "toolCall", "id": f"{tag}{t}", "name": "read", "arguments": {"path": "x"}}
        lines.append(_pi_line({"role": "assistant", "content": [call]}))
        body = "\n".join(f"export const v{i} = {i}; // {tag} {t}" for i in range(60))
        lines.append(
            _pi_line(
                {
                    "role": "toolResult",
                    "toolCallId": f"{tag}{t}",
                    "toolName": "read",
                    "content": [{"type": "text", "text": body}],
                }
            )
        )
        lines.append(
            _pi_line({"role": "assistant", "content": [{"type": "text", "text": "Read."}]})
        )
    return lines


def _pi_session(path: Path, user_exit_code: int) -> str:
    """Writes a session where the agent's ``npm test`` fails and enough follows to compact;
    returns the lines the agent appends next: the user's own ``$ npm test`` exiting with
    ``user_exit_code`` and enough after it to compact again."""
    header = json.dumps({"type": "session", "id": "s", "timestamp": "2026-01-01T00:00:00Z"})
    call = {"type": "toolCall", "id": "t1", "name": "bash", "arguments": {"command": "npm test"}}
    failed = "FAIL test/cart.test.ts › total rounds to cents\nTests: 1 failed\nexit code 1"
    first = [
        header,
        _pi_line({"role": "user", "content": "Make the cart tests pass."}),
        _pi_line({"role": "assistant", "content": [call]}),
        _pi_line(
            {
                "role": "toolResult",
                "toolCallId": "t1",
                "toolName": "bash",
                "isError": True,
                "content": [{"type": "text", "text": failed}],
            }
        ),
        *_padding(8, "a"),
    ]
    rerun = {
        "role": "bashExecution",
        "command": "npm test",
        "output": "Tests: 12 passed" if user_exit_code == 0 else "Tests: 1 failed",
        "exitCode": user_exit_code,
        "cancelled": False,
        "truncated": False,
    }
    second = [_pi_line(rerun), *_padding(8, "b")]
    path.write_text("\n".join(first) + "\n", encoding="utf-8")
    return "\n".join(second) + "\n"


def _import_and_compact(cli, db, path: Path, llm: FakeLLM | None = None) -> None:
    assert cli("--db", db.url, "import", path).exit_code == 0
    if llm is None:
        ran = cli("--db", db.url, "compact", "1", *LIMITS)
    else:
        ran = compact_with_llm(cli, db, llm, "1")
    assert ran.exit_code == 0 and "compacted" in ran.output, ran.output


def _summaries(db) -> list[str]:
    engine = create_engine(db.url)
    try:
        return [c.summary for c in Store(engine).compactions(1)]
    finally:
        engine.dispose()


def test_ctxtool_compact_retires_a_failure_the_user_fixed(db, cli, tmp_path):
    path = tmp_path / "pi.jsonl"
    more = _pi_session(path, user_exit_code=0)
    _import_and_compact(cli, db, path)
    [first] = _summaries(db)
    assert any(e.startswith("- `npm test` failed") for e in items(first, "Errors and fixes"))
    with path.open("a", encoding="utf-8") as f:
        f.write(more)
    _import_and_compact(cli, db, path)
    second = _summaries(db)[-1]
    assert not any("npm test" in e for e in items(second, "Errors and fixes")), second
    assert any(
        d.startswith("- `npm test` failed") and d.endswith(FIXED) for d in items(second, "Done")
    )


def test_ctxtool_compact_keeps_it_open_when_the_user_s_rerun_failed(sqlite_db, cli, tmp_path):
    path = tmp_path / "pi.jsonl"
    more = _pi_session(path, user_exit_code=1)
    _import_and_compact(cli, sqlite_db, path)
    with path.open("a", encoding="utf-8") as f:
        f.write(more)
    _import_and_compact(cli, sqlite_db, path)
    second = _summaries(sqlite_db)[-1]
    assert any(
        e.startswith("- `npm test` failed") and e.endswith(STILL_OPEN)
        for e in items(second, "Errors and fixes")
    ), second


def test_ctxtool_compact_tells_the_llm_the_user_fixed_it(sqlite_db, cli, tmp_path):
    """The second compaction through the openai summarizer (tests/llm_server.py): its prompt
    lists the carried failure the user's run fixed."""
    path = tmp_path / "pi.jsonl"
    more = _pi_session(path, user_exit_code=0)
    _import_and_compact(cli, sqlite_db, path)  # extractive: the failure is carried as open
    with path.open("a", encoding="utf-8") as f:
        f.write(more)
    with FakeLLM() as llm:
        _import_and_compact(cli, sqlite_db, path, llm)
        prompt = llm.requests[0]["messages"][-1]["content"]
    assert "<fixed-since-previous-summary>\n- `npm test`\n</fixed-since-previous-summary>" in prompt
    assert "[User ran a shell command]: $ npm test" in prompt


def test_a_long_last_word_is_cut_inside_it_not_before_it():
    """`curl <a URL longer than the limit>` keeps the start of the URL, not `curl` alone: a
    command is cut at a space only when that keeps most of it."""
    from ctxtool.compaction.summarizers.span_notes import COMMAND_CHARS, shown_command

    url = "https://api.example.com/" + "segment/" * 40
    shown = shown_command(f"curl -sf {url}")
    assert shown.startswith("`curl -sf https://api.example.com/segment/") and shown.endswith(
        "` (shortened)"
    )
    assert len(shown) == len("`` (shortened)") + COMMAND_CHARS
    words = " ".join(["word"] * 60)  # many short words: cut at a space
    assert shown_command(words).removesuffix("` (shortened)").endswith("word")


def test_only_the_failed_command_retires_a_failure():
    """A carried failure is fixed by a run of its own command, never by one that its error
    or the agent's reaction names (review finding: `git status` succeeding marked a pytest
    failure fixed)."""
    from ctxtool.compaction.summarizers.span_notes import fixed_command

    item = (
        "- `pytest t.py` failed: AssertionError in `conftest.py` "
        "(then: I will check `git status`)" + STILL_OPEN
    )
    assert fixed_command(item, {"`git status`", "`conftest.py`"}) is None
    assert fixed_command(item, {"`pytest t.py`"}) == "`pytest t.py`"
    first = summarize(
        None,
        [
            msg(1, "user", "Run the tests."),
            *bash(2, "pytest tests/test_api.py", "FAILED tests/test_api.py::test_x", 1),
            msg(4, "assistant", "Let me look at `git status` first."),
        ],
    )
    [failure] = items(first, "Errors and fixes")
    assert "`git status`" in failure and failure.endswith(STILL_OPEN)
    second = summarize(first, [msg(1, "user", "Go on."), *bash(2, "git status", "clean", 0)])
    assert failure in items(second, "Errors and fixes"), second
