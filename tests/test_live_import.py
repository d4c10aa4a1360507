"""Issue 32 item 0: a transcript still being written never corrupts the store.

A writer appends a real transcript to its file in random chunks (1 byte to a tenth of the
file, 8 KB at least) while ``ctxtool import`` runs again and again through the real entry
point, with and without --skip-invalid: no run fails, and the store ends exactly as one import
of the finished file leaves it (for Codex and OpenAI chat files, whose ids are line numbers,
too). Then the smaller traps: a link under another name, an endless stdin, a non-UTF-8 session
argument."""

from __future__ import annotations

import gc
import json
import os
import random
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from ctxtool.importer import Importer

from .conftest import TRANSCRIPTS, Database


def _openai_chat_jsonl() -> bytes:
    doc = json.loads(
        (TRANSCRIPTS / "openai-chat" / "SWE-agent-function_calling_simple.traj").read_text()
    )
    messages = next(v for k, v in doc.items() if k in ("history", "messages"))
    return b"".join(json.dumps(m).encode() + b"\n" for m in messages)


def _head(path: Path, lines: int) -> bytes:
    return b"".join(path.read_bytes().splitlines(keepends=True)[:lines])


FINISHED = {
    "claude-code": lambda: (
        TRANSCRIPTS / "claude-code" / "1af7fc5e-8455-4414-9ccd-011d40f70b2a.jsonl"
    ).read_bytes(),
    "codex": lambda: _head(TRANSCRIPTS / "codex" / "agent-sessions-codex-small.jsonl", 118),
    "pi": lambda: _head(TRANSCRIPTS / "pi" / "before-compaction.jsonl", 60),
    "openai-chat": _openai_chat_jsonl,
}


def snapshot(db) -> dict:
    """Everything an import decides about its sessions, in order."""
    sessions = db.rows(
        "SELECT session_id, source_format, source_id, title, model, system_prompt"
        " FROM agent_session ORDER BY session_id"
    )
    out = {}
    for s in sessions:
        messages = db.rows(
            "SELECT id, source_id, role, content, tool_calls, tool_call_id, name"
            " FROM agent_message WHERE session_id = :s ORDER BY id",
            s=s["session_id"],
        )
        by_id = {m.pop("id"): m["source_id"] for m in messages}
        checkpoints = [
            (c["source_id"], c["summary"], by_id[c["first_kept_message_id"]], c["tokens_before"])
            for c in db.rows(
                "SELECT source_id, summary, first_kept_message_id, tokens_before"
                " FROM agent_compaction WHERE session_id = :s ORDER BY id",
                s=s["session_id"],
            )
        ]
        key = (s["source_format"], s["source_id"])
        out[key] = (s["title"], s["model"], s["system_prompt"], messages, checkpoints)
    return out


def _chunks(data: bytes, rng: random.Random) -> list[bytes]:
    """``data`` in random chunks, half of them a few bytes (a line cut anywhere), half up to a
    tenth of the file or 8 KB: about 40 for a large file, fewer for a small one. Every import
    of a growing file reads it whole: more chunks of a large file cost time, not other cuts."""
    out, at = [], 0
    largest = max(8192, len(data) // 10)
    while at < len(data):
        size = rng.choice([rng.randint(1, 16), rng.randint(1, largest)])
        out.append(data[at : at + size])
        at += size
    return out


# Each format strict on one database and with --skip-invalid on the other, the pairs
# alternating between formats: every mode meets both databases, at half the runs of all four.
LIVE_RUNS = [
    pytest.param(fmt, skip_invalid, kind, id=f"{fmt}-{mode}-{kind}")
    for n, fmt in enumerate(FINISHED)
    for skip_invalid, mode, kind in (
        (False, "strict", ("mysql", "sqlite")[n % 2]),
        (True, "skip-invalid", ("sqlite", "mysql")[n % 2]),
    )
]


@pytest.mark.slow
@pytest.mark.parametrize(("fmt", "skip_invalid", "empty_db"), LIVE_RUNS, indirect=["empty_db"])
def test_imports_while_the_agent_appends(db, cli, tmp_path, fmt, skip_invalid):
    finished = FINISHED[fmt]()
    rng = random.Random(f"{fmt}-{skip_invalid}")
    chunks = _chunks(finished, rng)
    path = tmp_path / f"live-{fmt}.jsonl"
    path.write_bytes(chunks[0])
    import_started, stop = threading.Semaphore(0), threading.Event()

    def writer():
        # One to three chunks during each import, so reads race with writes all along.
        with open(path, "ab", buffering=0) as out:
            pending = chunks[1:]
            while pending and not stop.is_set():
                if not import_started.acquire(timeout=0.05):
                    continue
                for _ in range(rng.randint(1, 3)):
                    if pending:
                        out.write(pending.pop(0))

    thread = threading.Thread(target=writer)
    thread.start()
    runs = []
    args = ["--db", db.url, "import", "--json", path] + (["--skip-invalid"] if skip_invalid else [])
    try:
        while thread.is_alive():
            import_started.release()
            result = cli(*args)
            gc.collect()  # each run's engine and its pooled connection (the CLI keeps them)
            runs.append(result)
            assert result.exit_code == 0, result.output
            assert json.loads(result.stdout)[0]["error"] is None
    finally:
        stop.set()
        thread.join()
    final = cli(*args)
    assert final.exit_code == 0, final.output
    assert path.read_bytes() == finished and len(runs) >= len(chunks) // 3
    assert all("invalid_line" not in json.loads(r.stdout)[0]["skipped_by_kind"] for r in runs)

    reference = Database("sqlite", f"sqlite:///{tmp_path / 'reference.db'}").migrate()
    try:
        [once] = Importer(reference.engine).import_paths([str(path)])
        assert once.error is None and once.messages_added > 5
        assert snapshot(db) == snapshot(reference)
    finally:
        reference.engine.dispose()


def test_a_symlink_or_hard_link_under_another_name_is_the_same_session(db, cli, tmp_path):
    original = tmp_path / "task-42.jsonl"
    original.write_bytes(_openai_chat_jsonl())
    (tmp_path / "alias.jsonl").symlink_to(original)
    os.link(original, tmp_path / "copy-name.jsonl")
    for name in ("task-42.jsonl", "alias.jsonl", "copy-name.jsonl"):
        result = cli("--db", db.url, "import", tmp_path / name)
        assert result.exit_code == 0, result.output
    assert db.scalar("SELECT COUNT(*) FROM agent_session") == 1
    # A file imported under its one name, then hard-linked: imported again under that name it
    # is found through the name's id and moves to its inode's; then every name finds it.
    other = tmp_path / "b" / "run.jsonl"
    other.parent.mkdir()
    other.write_bytes(b'{"role": "user", "content": "one"}\n')
    assert cli("--db", db.url, "import", other).exit_code == 0
    os.link(other, tmp_path / "b" / "run-link.jsonl")
    with other.open("ab") as out:
        out.write(b'{"role": "assistant", "content": "two"}\n')
    result = cli("--db", db.url, "import", "--json", other)
    assert json.loads(result.stdout)[0]["added"] == 1
    with other.open("ab") as out:
        out.write(b'{"role": "user", "content": "three"}\n')
    result = cli("--db", db.url, "import", "--json", tmp_path / "b" / "run-link.jsonl")
    assert json.loads(result.stdout)[0]["added"] == 1
    assert db.scalar("SELECT COUNT(*) FROM agent_session") == 2


def test_endless_binary_stdin_is_refused_at_once(db):
    proc = subprocess.run(
        f"{sys.executable} -m ctxtool --db {db.url} import - < /dev/zero",
        shell=True,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 1
    assert "<stdin>: binary data, not a text transcript" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_a_hard_linked_file_keeps_its_session_whichever_name_is_imported_first(db, cli, tmp_path):
    """#32: a file imported under its one name, then hard-linked, used to keep its session only
    if it was imported again once through that first name; through the new name first it
    became a new session. Every name of the inode in its folder now finds it."""
    first = tmp_path / "run.jsonl"
    first.write_bytes(b'{"role": "user", "content": "one"}\n')
    assert cli("--db", db.url, "import", first).exit_code == 0
    link = tmp_path / "run-link.jsonl"
    os.link(first, link)
    with first.open("ab") as out:
        out.write(b'{"role": "assistant", "content": "two"}\n')
    through_link = json.loads(cli("--db", db.url, "import", "--json", link).stdout)[0]
    assert (through_link["added"], through_link["present"]) == (1, 1)
    again = json.loads(cli("--db", db.url, "import", "--json", first).stdout)[0]
    assert (again["added"], again["session_id"]) == (0, through_link["session_id"])
    assert db.scalar("SELECT COUNT(*) FROM agent_session") == 1
    assert db.scalar("SELECT COUNT(*) FROM agent_message") == 2
