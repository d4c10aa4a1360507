"""A command, path or URL the transcript holds is never a fabrication (issue #42): a summary
quoting a real multi-step ``curl`` line of the edgerunner Codex session was flagged, because
the check's copy of the line had lost its URLs."""

from __future__ import annotations

import pytest

from ctxtool.core.evaluator import fabrications
from ctxtool.db import create_engine
from ctxtool.importer import Importer
from ctxtool.migrate import Migrator
from ctxtool.store import Store

from .conftest import TRANSCRIPTS

CURL = (
    "curl -sS http://127.0.0.1:8080/api/health && printf '\\n-- snapshot --\\n' && "
    "curl -sS http://127.0.0.1:8080/api/snapshot"
)


@pytest.fixture(scope="module")
def edgerunner(tmp_path_factory):
    path = tmp_path_factory.mktemp("edgerunner") / "store.db"
    engine = create_engine(f"sqlite:///{path}")
    Migrator(engine).up()
    Importer(engine, fmt="codex").import_paths(
        [str(TRANSCRIPTS / "codex" / "edgerunner-codex-session.jsonl")]
    )
    store = Store(engine)
    [session_id] = store.session_ids()
    yield store.messages(session_id)
    engine.dispose()


def test_a_quoted_multi_step_curl_line_is_no_fabrication(edgerunner):
    summary = f"## Current work\n- checked the engine with `{CURL}` → ok"
    assert fabrications(summary, edgerunner) == []


def test_an_invented_command_beside_it_still_is(edgerunner):
    summary = (
        f"- `{CURL}`\n- then `curl -sS http://127.0.0.1:8080/api/ready && cargo publish --dry-run`"
    )
    assert [f.text for f in fabrications(summary, edgerunner)] == [
        "curl -sS http://127.0.0.1:8080/api/ready && cargo publish --dry-run"
    ]


def test_a_tool_call_shown_as_its_tool_and_path_is_no_fabrication(tmp_path):
    """Pi's kimchi session: a ``grep`` tool call on a path the summary shows as
    ``grep <path>`` (the call's tool and path, no command line)."""
    engine = create_engine(f"sqlite:///{tmp_path / 'k.db'}")
    Migrator(engine).up()
    Importer(engine, fmt="pi").import_paths([str(TRANSCRIPTS / "pi" / "kimchi-dev-session.jsonl")])
    store = Store(engine)
    [session_id] = store.session_ids()
    path = "/Users/ibar/castai/src/kimchi-dev/node_modules/@mariozechner/pi-agent-core"
    summary = f"- `grep {path}` failed: Path not found"
    assert fabrications(summary, store.messages(session_id)) == []
    assert fabrications(f"- `grep {path}/missing.ts`", store.messages(session_id)) != []
    engine.dispose()
