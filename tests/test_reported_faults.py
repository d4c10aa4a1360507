"""Issue #42's review of the extractive summaries: what a span's facts (ctxtool.core.span_facts,
ctxtool.core.changes, ctxtool.core.outcomes) misread. Each rule as a plain list, then on the
real shared span where the review found it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ctxtool.compaction.summarizers import ExtractiveSummarizer, SummaryRequest
from ctxtool.core.changes import ADDED, DELETED, Change, listed_as, merged, reported_changes
from ctxtool.core.outcomes import aborted, command_target, still_running
from ctxtool.core.records import Message, calls_of
from ctxtool.core.span_facts import signals_of
from ctxtool.core.touched_files import files_touched
from ctxtool.evaluation.keys import keyed_span, load_key

from .conftest import TRANSCRIPTS

KEYS = Path(__file__).resolve().parent / "answer_keys"


@pytest.fixture(scope="module")
def spans(tmp_path_factory):
    cache: dict[tuple[str, bool], list[Message]] = {}

    def span(name: str, whole: bool = False) -> list[Message]:
        """The key's summarized span, or with ``whole`` every message of its transcript's
        prefix."""
        if (name, whole) not in cache:
            key = load_key(KEYS / f"{name}.json")
            keyed = keyed_span(key, TRANSCRIPTS, tmp_path_factory.mktemp(name[:30]))
            cache[name, whole] = keyed.messages if whole else keyed.summarized
        return cache[name, whole]

    return span


class Span:
    """Messages as a runtime stores them: calls and their results."""

    def __init__(self) -> None:
        self.messages: list[Message] = []
        self._calls = 0

    def add(self, role: str, content: str | None = None, **kw) -> Message:
        m = Message(len(self.messages) + 1, 1, role, content, **kw)
        self.messages.append(m)
        return m

    def call(self, name: str, result: str, details: dict | None = None, **arguments) -> None:
        self._calls += 1
        call_id = f"call_{self._calls}"
        function = {"name": name, "arguments": json.dumps(arguments)}
        self.add(
            "assistant",
            None,
            tool_calls=[{"id": call_id, "type": "function", "function": function}],
        )
        self.add("tool", result, tool_call_id=call_id, details=details)


def _changed(messages: list[Message]) -> list[str]:
    return [c.path for c in signals_of(messages).files_changed]


# -- 1. a domain or a build's artifact is no changed file ----------------------------------------


def test_a_domain_and_a_builds_artifacts_are_no_reported_change():
    assert reported_changes("Updating crates.io index") == []
    assert reported_changes("Created wheel for foo: filename=foo-1.0-py3-none-any.whl") == []
    assert reported_changes("Removed build/lib.linux-x86_64-cpython-311") == []
    assert reported_changes("removed node_modules/.cache/x.json") == []
    # a file of the work still is one
    assert reported_changes("Created src/app.py and removed docs/old.md") == [
        Change("src/app.py", ADDED),
        Change("docs/old.md", DELETED),
    ]


def test_a_poll_of_a_running_commands_output_is_no_report():
    s = Span()
    s.add("user", "build it")
    s.call("wait", "Updating crates.io index\n Compiling serde v1.0", cell_id="3")
    s.call("write_stdin", "Created wheel for foo: filename=foo-1.0.tar.gz", session_id=1)
    s.call("make_note", "✅ Created notes/today.md")
    assert _changed(s.messages) == ["notes/today.md"]


def test_edgerunner_lists_no_crates_io(spans):
    """cargo's "Updating crates.io index", read from a Codex ``wait``, was a changed file."""
    changed = _changed(spans("codex--edgerunner-codex-session"))
    assert "crates.io" not in changed
    assert "crates/edgerunner-service/src/config.rs" in changed  # its real files stay


# -- 2. a method is no file; a bare name of a listed file is that file ---------------------------


def test_a_called_name_is_no_file_and_a_bare_name_is_the_listed_path():
    assert reported_changes("3. **Updated all chalk calls in `UserMessageList.render()`:**") == []
    assert reported_changes("Created:\n- `Foo.bar()`\n- `cfg.yaml`\n") == [
        Change("cfg.yaml", ADDED)
    ]
    assert reported_changes("Updated foo.py.") == [Change("foo.py")]  # a sentence's stop
    listed = ["packages/tui/test/truncated-text.test.ts", "src/a/x.ts", "src/b/x.ts"]
    assert listed_as("truncated-text.test.ts", listed) == listed[0]
    assert listed_as("x.ts", listed) == "x.ts"  # two files end so: which one is unknown
    assert listed_as("new.ts", listed) == "new.ts"
    assert merged([Change("pkg/a/x.ts"), Change("x.ts", ADDED), Change("y.ts")]) == [
        Change("pkg/a/x.ts"),
        Change("y.ts"),
    ]


def test_pi_large_session_lists_no_method_and_no_file_twice(spans):
    """The closing words "Updated all chalk calls in `UserMessageList.render()`" and "Added
    comprehensive tests in `truncated-text.test.ts`" listed a method and a second line of a
    file already listed with its directory."""
    changed = _changed(spans("pi--large-session"))
    assert "UserMessageList.render" not in changed
    assert "truncated-text.test.ts" not in changed
    assert "packages/tui/test/truncated-text.test.ts" in changed
    assert len(changed) == len(set(changed))


# -- 3. an aborted or a still running call is not done --------------------------------------------


def summary(messages: list[Message], budget: int = 3500) -> str:
    read, modified = files_touched(calls_of(messages))
    files = {"read_files": read, "modified_files": modified}
    request = SummaryRequest(None, messages, files, max_tokens=budget, min_carry_over=0.9)
    return ExtractiveSummarizer().summarize(request).text


def _through(messages: list[Message], text: str) -> list[Message]:
    """The span up to the first result that says ``text``."""
    at = next(i for i, m in enumerate(messages) if m.role == "tool" and text in (m.content or ""))
    return messages[: at + 1]


def test_aborted_and_still_running_results():
    assert aborted("aborted by user after 77.1s")
    assert aborted("[Request interrupted by user for tool use]")
    assert not aborted("ok\nThe test checks that a run aborted by user is retried")
    assert still_running("Command still running (session tender-nexus, pid 10844). Use process")
    assert still_running("(no new output)\n\nProcess still running.")
    assert still_running("Process running with session ID 7")
    assert not still_running("done in 2s")
    s = Span()
    s.add("user", "check the page")
    s.call("exec_command", "aborted by user after 77.1s", cmd="node check.mjs")
    s.call("exec", "Command still running (session a, pid 1).", command="git push origin main")
    assert signals_of(s.messages).failures == []  # the user stopped it: no error to fix
    text = summary(s.messages)
    assert "`node check.mjs` → aborted" in text and "✓ ok: aborted" not in text
    assert "`git push origin main` → still running" in text and "✓ ok: Command" not in text


def test_edgerunner_visual_check_the_user_aborted_is_not_done(spans):
    messages = _through(spans("codex--edgerunner-codex-session", whole=True), "aborted by user")
    text = summary(messages)
    [line] = [x for x in text.splitlines() if "node scripts/visual-check.mjs`" in x]
    assert "→ aborted" in line and "✓" not in line
    assert not any("visual-check.mjs" in f.command for f in signals_of(messages).failures)


def test_openclaw_push_still_running_is_not_done(spans):
    name = "pi--openclaw-d27ecd5a-45f9-41a3-bad1-ddef6a3c79fc"
    messages = _through(spans(name, whole=True), "session tender-nexus")
    [line] = [x for x in summary(messages).splitlines() if "git push backup master" in x]
    assert "→ still running" in line and "✓" not in line


# -- 4. a copy or a move is keyed on its destination ----------------------------------------------


def test_a_copy_is_keyed_on_where_it_puts_the_file():
    global_copy = "mkdir -p ~/t && cp $(npm root -g)/pkg/dist/dark.json ~/t/custom.json"
    assert command_target(global_copy) == "to:~/t/custom.json"
    assert command_target("cp src/dark.json ~/t/custom.json") == "to:~/t/custom.json"
    assert command_target("mv build/a.txt out/") == "to:out"
    assert command_target("cp src/a.json ~/t/other.json") != command_target(global_copy)
    s = Span()
    s.add("user", "install the theme")
    s.call("bash", "cp: pkg/dist/dark.json: No such file or directory\nexit code 1",
           details={"exit_code": 1}, command=global_copy)  # fmt: skip
    s.call("bash", "", details={"exit_code": 0}, command="cp src/dark.json ~/t/custom.json")
    [failure] = signals_of(s.messages).failures
    assert failure.fixed and "cp src/dark.json" in (failure.fixed_by or "")


def test_pi_large_session_theme_copy_is_fixed(spans):
    """``cp $(npm root -g)/…/dark.json ~/.pi/agent/themes/custom.json`` failed, the next copy
    from packages/coding-agent/src/theme to the same file succeeded: "still open" said it."""
    messages = spans("pi--large-session")
    [failure] = [f for f in signals_of(messages).failures if "npm root -g" in f.command]
    assert failure.fixed and "packages/coding-agent/src/theme/dark.json" in (failure.fixed_by or "")
    text = summary(messages)
    assert not any("npm root -g" in x and "still open" in x for x in text.splitlines())


# -- 5. another commit's --stat is no change of the session --------------------------------------

STAT = " src/cli.ts | 4 ++--\n src/web.ts | 9 +++++++--\n 2 files changed, 9 insertions(+)\n"


def test_only_the_work_trees_diff_stat_lists_changes():
    for command, listed in [
        ("git show 9b6e517 --stat", False),
        ("git log --stat -3", False),
        ("git diff main..feature --stat", False),
        ("git diff --stat", True),
        ("git -C repo diff HEAD --stat", True),
    ]:
        s = Span()
        s.add("user", "what changed?")
        s.call("bash", STAT, details={"exit_code": 0}, command=command)
        assert (_changed(s.messages) == ["src/cli.ts", "src/web.ts"]) is listed, command


def test_kimchi_git_show_of_a_commit_is_no_change(spans):
    """The kimchi session opens by reading commit 9b6e517 with ``git show --stat``: its files
    were listed as changed by the session."""
    changed = _changed(spans("pi--kimchi-dev-session"))
    assert "src/cli.ts" not in changed
    assert "src/extensions/web-fetch/page-fetcher.ts" not in changed


# -- 6. a runtime's notice is no request ----------------------------------------------------------

OPENCLAW = "pi--openclaw-d27ecd5a-45f9-41a3-bad1-ddef6a3c79fc"


@pytest.mark.parametrize(
    ("name", "words"),
    [
        (OPENCLAW, "有两个问题：第一，我刚刚自己推送仓库的时候并没有出现不能推送大文件的问题"),
        (f"{OPENCLAW}--before-third-compaction", "我想像之前新建一个单独的“大象”workspace"),
    ],
)
def test_openclaw_latest_request_is_the_users_words_not_an_exec_notice(spans, name, words):
    """OpenClaw puts "System: [time] Exec failed (…) :: …" notices before the user's words
    in one message, and a message of notices only after them: the latest request is the
    user's words, the notices none of it."""
    messages = spans(name)
    notices = [
        m for m in messages if m.role == "user" and (m.content or "").startswith("System: [")
    ]
    assert notices and any(m.id > notices[0].id for m in messages)  # the span has them
    latest = signals_of(messages).latest_request
    assert latest is not None and latest.text.startswith(words)
    assert "Exec failed" not in latest.text and "System:" not in latest.text
    assert "message_id" not in latest.text
    sections = summary(messages)
    [quoted] = [x for x in sections.splitlines() if words in x][:1]
    assert "Exec failed" not in quoted
