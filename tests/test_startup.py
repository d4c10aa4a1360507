"""What a `ctxtool` process pays before it does anything: a command loads only what its work
needs. `compact --all` imports the LLM client only to ask it something (a dry run, a run with
nothing over threshold: 0.9 s of CPU saved), and a run that finds nothing over threshold in the
stored counts loads no vocabulary (0.6 s), whatever summarizer is configured."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from typing import Any

from ctxtool.compaction.summarizers import OpenAISummarizer
from ctxtool.core.context_size import _SYNTHETIC_RESULT_TOKENS
from ctxtool.core.records import NO_RESULT_TEXT
from ctxtool.core.tokens import SHIPPED_VOCABULARIES, MessageText, count_messages
from ctxtool.store import Store

from .builders import LIMITS, add_session, coding_session

# The real entry point in a fresh process; then what it loaded, on stderr's last line.
_LOADED_AFTER = """
import json, sys
from ctxtool.cli import main
try:
    main(sys.argv[1:], prog_name="ctxtool")
except SystemExit as stop:
    code = stop.code
from ctxtool.core import tokens
loaded = {"openai": "openai" in sys.modules, "vocabularies": sorted(tokens._cache), "code": code}
print(json.dumps(loaded), file=sys.stderr)
"""


def _compact_all(db, *args: str) -> tuple[list[dict], dict]:
    """`compact --all` with the LLM summarizer configured, in a fresh process: its rows, and
    whether it imported the openai client and which vocabularies it loaded."""
    return run_fresh(
        ["--db", db.url, "compact", "--all", *args]
        + ["--summarizer", "openai", "--base-url", "http://127.0.0.1:9/v1", "--model", "m"]
        + ["--json", *LIMITS],
        dict(os.environ, OPENAI_API_KEY="sk-test"),
    )


def run_fresh(args: list[str], env: dict[str, str]) -> tuple[Any, dict]:
    """``ctxtool args`` (a --json command that succeeds) in a fresh process with ``env``: its
    JSON output, and whether it imported the openai client and which vocabularies it loaded."""
    out = subprocess.run(
        [sys.executable, "-c", _LOADED_AFTER, *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    loaded = json.loads(out.stderr.strip().splitlines()[-1])
    assert loaded.pop("code") == 0, out.stderr
    return json.loads(out.stdout), loaded


def test_a_run_with_nothing_over_threshold_loads_no_client_and_no_vocabulary(db):
    """A cron run that finds nothing to do (most of them) sums stored counts and stops."""
    for sid in range(1, 4):
        add_session(db, sid, coding_session(3, tag=str(sid)), model="gpt-4o")
    Store(db.engine).count_tokens()
    rows, loaded = _compact_all(db)
    assert rows == [] and loaded == {"openai": False, "vocabularies": []}


def test_a_dry_run_imports_no_llm_client(db):
    """It plans (which counts: the vocabulary is loaded) and asks the summarizer nothing."""
    for sid in range(1, 4):
        add_session(db, sid, coding_session(12, tag=str(sid)), model="gpt-4o")
    Store(db.engine).count_tokens()
    rows, loaded = _compact_all(db, "--dry-run")
    assert [r["status"] for r in rows] == ["planned"] * 3
    assert loaded == {"openai": False, "vocabularies": ["o200k_base"]}


def test_the_synthetic_result_counts_of_the_shipped_encodings_are_as_counted():
    assert set(_SYNTHETIC_RESULT_TOKENS) == set(SHIPPED_VOCABULARIES)
    for encoding, tokens in _SYNTHETIC_RESULT_TOKENS.items():
        assert count_messages([MessageText("tool", NO_RESULT_TEXT)], encoding) == [tokens]


def test_the_llm_client_is_made_once_by_workers_asking_together():
    summarizer = OpenAISummarizer("m", "http://127.0.0.1:9/v1", "k", timeout=5, max_retries=0)
    start = threading.Barrier(8)
    clients: list[object] = []

    def first_request() -> None:
        start.wait()
        clients.append(summarizer.client)

    workers = [threading.Thread(target=first_request) for _ in range(8)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert len(clients) == 8 and len({id(c) for c in clients}) == 1
    assert str(summarizer.client.base_url) == "http://127.0.0.1:9/v1/"
    assert summarizer.client.max_retries == 0 and summarizer.client.timeout == 5
