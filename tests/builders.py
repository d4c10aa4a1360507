"""Builders shared by the tests: sessions written the way an agent runtime writes them, and
checks on what a store holds. Plain functions; no fixtures here."""

from __future__ import annotations

import hashlib
import json
from typing import TYPE_CHECKING

from ctxtool.core.plan import CompactionSettings
from ctxtool.store import Store

if TYPE_CHECKING:
    from .conftest import Database

# Small windows so a few dozen messages are "over threshold".
LIMITS = ["--context-window", "6000", "--reserve-tokens", "1000", "--keep-recent-tokens", "1500"]
SETTINGS = CompactionSettings(context_window=6000, reserve_tokens=1000, keep_recent_tokens=1500)


def coding_session(turns: int, tag: str = "") -> list[dict]:
    msgs = []
    for t in range(turns):
        msgs.append(
            {
                "role": "user",
                "content": f"Turn {t}{tag}: please fix the failing test in src/mod{t}.py " * 8,
            }
        )
        msgs.append(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": f"call{t}{tag}",
                        "type": "function",
                        "function": {
                            "name": "read",
                            "arguments": json.dumps({"path": f"src/mod{t}.py"}),
                        },
                    }
                ],
            }
        )
        body = "\n".join(
            f"line {i}: value = compute({i}) # Error: ZeroDivisionError"
            if i == 3
            else f"line {i}: value = compute({i})"
            for i in range(40)
        )
        msgs.append({"role": "tool", "tool_call_id": f"call{t}{tag}", "content": body})
        msgs.append({"role": "assistant", "content": f"Fixed mod{t}. Moving on to the next file."})
    return msgs


def history_fingerprint(db) -> str:
    rows = db.rows(
        "SELECT id, session_id, role, content, tool_call_id FROM agent_message ORDER BY id"
    )
    return hashlib.sha256(json.dumps(rows, default=str).encode()).hexdigest()


def assert_valid_context(store: Store, session_id: int) -> None:
    ctx = store.restored_context(session_id)
    calls = set()
    for m in ctx.to_openai():
        for c in m.get("tool_calls") or ():
            calls.add(c["id"])
        if m["role"] == "tool":
            assert m["tool_call_id"] in calls, "orphan tool result in restored context"


def add_session(
    db: Database,
    session_id: int,
    messages: list[dict],
    model: str | None = None,
    system_prompt: str | None = None,
) -> list[int]:
    """Write a session the way an agent runtime would (no token counts); return message ids."""
    from ctxtool.db.schema import agent_message, agent_session

    with db.engine.begin() as conn:
        conn.execute(
            agent_session.insert().values(
                session_id=session_id, model=model, system_prompt=system_prompt
            )
        )
        ids = []
        for m in messages:
            result = conn.execute(agent_message.insert().values(session_id=session_id, **m))
            ids.append(result.inserted_primary_key[0])
    return ids


def run_on_a_terminal(
    args: list[str], stream: str = "stdout", env: dict | None = None
) -> tuple[int, str]:
    """Run ``python -m ctxtool ARGS`` with ``stream`` (stdout or stderr) on a pseudo-terminal
    and the other discarded; return its exit code and what it wrote there."""
    import os
    import pty
    import subprocess
    import sys

    leader, follower = pty.openpty()
    streams = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL, stream: follower}
    proc = subprocess.Popen(
        [sys.executable, "-m", "ctxtool", *args], stdin=subprocess.DEVNULL, env=env, **streams
    )
    os.close(follower)
    chunks = []
    while True:
        try:
            data = os.read(leader, 65536)
        except OSError:
            break
        if not data:
            break
        chunks.append(data)
    os.close(leader)
    return proc.wait(timeout=120), b"".join(chunks).decode("utf-8", "replace")
