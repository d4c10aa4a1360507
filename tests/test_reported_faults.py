"""Issue #42's review of the extractive summaries: what a span's facts (ctxtool.core.span_facts,
ctxtool.core.changes, ctxtool.core.outcomes) misread. Each rule as a plain list, then on the
real shared span where the review found it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ctxtool.core.changes import ADDED, DELETED, Change, listed_as, merged, reported_changes
from ctxtool.core.records import Message
from ctxtool.core.span_facts import signals_of
from ctxtool.evaluation.keys import keyed_span, load_key

from .conftest import TRANSCRIPTS

KEYS = Path(__file__).resolve().parent / "answer_keys"


@pytest.fixture(scope="module")
def spans(tmp_path_factory):
    cache: dict[str, list[Message]] = {}

    def span(name: str) -> list[Message]:
        if name not in cache:
            key = load_key(KEYS / f"{name}.json")
            where = tmp_path_factory.mktemp(name[:30])
            cache[name] = keyed_span(key, TRANSCRIPTS, where).summarized
        return cache[name]

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
