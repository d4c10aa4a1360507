"""`import` counts what it writes of a context's head (issue #44): each system prompt and each
imported checkpoint summary is counted as sent when written, kept in its details
(``ctxtool_counts``, with the digest of the text) as `tokens count` keeps it, so `tokens count`
finds no head left to count and a counted store is shown without a vocabulary; a summary
imported without its size gets its count, so `context checkpoints` counts nothing. A re-import
that adds nothing recounts nothing and loads no vocabulary."""

from __future__ import annotations

import json
import os

import sqlalchemy as sa

from ctxtool.core.context_size import HEAD_COUNTS_KEY, text_digest
from ctxtool.core.records import SUMMARY_PREFIX
from ctxtool.core.tokens import MessageText, count_messages, count_text

from .conftest import TRANSCRIPTS
from .test_startup import run_fresh

PROMPT = "You are a careful coding agent. Run the tests before you claim a fix."
OPENCLAW = TRANSCRIPTS / "pi" / "openclaw-d27ecd5a-45f9-41a3-bad1-ddef6a3c79fc.jsonl"


# A Pi session on gpt-4o with two runtime summaries in Japanese (o200k and cl100k count them
# apart), then what a later turn appends: a switch to gpt-4 and one exchange.
SUMMARY_JA = "hello.py は固定の挨拶を表示します。ファイルは編集していません。次はテストを実行する。"


def _pi_lines(model: str) -> str:
    def entry(kind: str, key: str, parent: str | None, **fields) -> str:
        at = "2026-05-12T01:02:27.000Z"
        return json.dumps({"type": kind, "id": key, "parentId": parent, "timestamp": at, **fields})

    def message(key: str, parent: str, role: str, text: str) -> str:
        content = [{"type": "text", "text": text}]
        return entry("message", key, parent, message={"role": role, "content": content})

    def compaction(key: str, parent: str) -> str:
        return entry(
            "compaction", key, parent, summary=SUMMARY_JA, firstKeptEntryId="m0", tokensBefore=19
        )

    lines = [
        json.dumps(
            {
                "type": "session",
                "version": 3,
                "id": "019e19b4-pi",
                "cwd": "/tmp/p",
                "timestamp": "2026-05-12T01:02:27.000Z",
            }
        ),
        entry("model_change", "m0", None, provider="openai", modelId=model),
        message("u1", "m0", "user", "Read hello.py and say what it prints."),
        message("a1", "u1", "assistant", "hello.py prints a greeting."),
        compaction("c1", "a1"),
        message("u2", "c1", "user", "Add one concise follow-up sentence."),
        message("a2", "u2", "assistant", "hello.py prints a fixture greeting."),
        compaction("c2", "a2"),
    ]
    return "".join(line + "\n" for line in lines)


def _pi_switch(model: str) -> str:
    at = "2026-05-12T01:03:00.000Z"
    lines = [
        {
            "type": "model_change",
            "id": "m1",
            "parentId": "c2",
            "timestamp": at,
            "provider": "openai",
            "modelId": model,
        },
        {
            "type": "message",
            "id": "u3",
            "parentId": "m1",
            "timestamp": at,
            "message": {"role": "user", "content": [{"type": "text", "text": "Again please."}]},
        },
        {
            "type": "message",
            "id": "a3",
            "parentId": "u3",
            "timestamp": at,
            "message": {"role": "assistant", "content": [{"type": "text", "text": "Done."}]},
        },
    ]
    return "".join(json.dumps(line) + "\n" for line in lines)


def _chat(path) -> None:
    messages = [
        {"role": "system", "content": PROMPT},
        {"role": "user", "content": "Fix the rounding of the checkout total."},
        {"role": "assistant", "content": "Reading shop/tax.py first."},
    ]
    path.write_text("".join(json.dumps(m) + "\n" for m in messages), encoding="utf-8")


def _fresh(db, *args: str):
    env = {k: v for k, v in os.environ.items() if not k.startswith("CTXTOOL_")}
    return run_fresh(["--db", db.url, *args], env)


def test_import_counts_system_prompts_and_summaries_as_it_writes_them(db, cli, tmp_path):
    chat = tmp_path / "chat.jsonl"
    _chat(chat)
    done, loaded = _fresh(db, "import", "--json", "--format", "openai-chat", str(chat))
    assert [r["session_id"] for r in done] == [1]
    assert loaded["vocabularies"] == ["o200k_base"]  # the prompt was counted
    imported = cli("--db", db.url, "import", str(OPENCLAW))
    assert imported.exit_code == 0, imported.output

    details = json.loads(db.scalar("SELECT details FROM agent_session WHERE session_id = 1"))
    [prompt_tokens] = count_messages([MessageText("system", PROMPT)], "o200k_base")
    assert details[HEAD_COUNTS_KEY]["o200k_base"] == {
        "tokens": prompt_tokens,
        "digest": text_digest(PROMPT),
    }
    summaries = db.rows("SELECT summary, details FROM agent_compaction WHERE session_id = 2")
    assert len(summaries) == 3
    for row in summaries:
        kept = json.loads(row["details"])
        sent = SUMMARY_PREFIX + row["summary"]
        [tokens] = count_messages([MessageText("user", sent)], "o200k_base")
        assert kept[HEAD_COUNTS_KEY]["o200k_base"] == {
            "tokens": tokens,
            "digest": text_digest(sent),
            # The summary's own size (Pi gives none), under the encoding it was counted with.
            "summary_tokens": count_text(row["summary"], "o200k_base"),
        }
        assert kept["readFiles"]  # the runtime's own details kept beside the count

    # The summaries' sizes too: `context checkpoints` counts nothing.
    rows, loaded = _fresh(db, "context", "checkpoints", "2", "--json")
    assert loaded == {"openai": False, "vocabularies": []}
    assert [r["summary_tokens"] for r in rows] == [
        count_text(r["summary"], "o200k_base")
        for r in db.rows("SELECT summary FROM agent_compaction WHERE session_id = 2 ORDER BY id")
    ]

    counted = cli("--db", db.url, "tokens", "count", "--all", "--json")
    assert counted.exit_code == 0, counted.output
    assert json.loads(counted.stdout)["heads_counted"] == 0  # nothing was left to count
    for session in ("1", "2"):
        _, loaded = _fresh(db, "context", "show", session, "--json")
        assert loaded == {"openai": False, "vocabularies": []}

    # A re-import that adds nothing changes nothing and counts nothing.
    before = db.rows("SELECT session_id, details, updated_at FROM agent_session ORDER BY 1")
    again, loaded = _fresh(db, "import", "--json", "--format", "openai-chat", str(chat))
    assert again[0]["added"] == 0 and loaded["vocabularies"] == []
    again, loaded = _fresh(db, "import", "--json", str(OPENCLAW))
    assert again[0]["added"] == 0 and loaded["vocabularies"] == []
    assert db.rows("SELECT session_id, details, updated_at FROM agent_session ORDER BY 1") == before


def test_a_prompt_changed_by_a_reimport_is_counted_again(db, cli, tmp_path):
    chat = tmp_path / "chat.jsonl"
    _chat(chat)
    assert cli("--db", db.url, "import", "--format", "openai-chat", chat).exit_code == 0
    longer = PROMPT + " Never edit generated files."
    lines = chat.read_text().splitlines()
    lines[0] = json.dumps({"role": "system", "content": longer})
    chat.write_text("\n".join(lines) + "\n")
    # A file that disagrees with the stored session is refused; under a new name it is a new one.
    moved = tmp_path / "other.jsonl"
    moved.write_text(chat.read_text())
    assert cli("--db", db.url, "import", "--format", "openai-chat", moved).exit_code == 0
    prompts = db.rows("SELECT system_prompt, details FROM agent_session ORDER BY session_id")
    for row in prompts:
        kept = json.loads(row["details"])[HEAD_COUNTS_KEY]["o200k_base"]
        assert kept["digest"] == text_digest(row["system_prompt"])


def _runtime_sets_prompt(db, prompt: str) -> None:
    with db.engine.begin() as conn:
        conn.execute(
            sa.text("UPDATE agent_session SET system_prompt = :p WHERE session_id = 1"),
            {"p": prompt},
        )


def test_a_reimport_that_adds_nothing_writes_nothing_under_a_prompt_the_file_lacks(db, tmp_path):
    """The runtime set the prompt (the transcript has none): the first re-import counts it, and
    neither that count nor any later re-import moves updated_at or writes the row again."""
    pi = tmp_path / "pi.jsonl"
    pi.write_text(_pi_lines("gpt-4o"), encoding="utf-8")
    done, _ = _fresh(db, "import", "--json", str(pi))
    assert done[0]["session_id"] == 1
    _runtime_sets_prompt(db, PROMPT)
    before = db.scalar("SELECT updated_at FROM agent_session WHERE session_id = 1")
    counted = None
    for attempt in range(3):
        again, loaded = _fresh(db, "import", "--json", str(pi))
        assert again[0]["added"] == 0
        row = db.rows("SELECT details, updated_at FROM agent_session WHERE session_id = 1")[0]
        assert row["updated_at"] == before, attempt
        kept = json.loads(row["details"])[HEAD_COUNTS_KEY]["o200k_base"]
        assert kept["digest"] == text_digest(PROMPT)
        # Counted once, by the first re-import; the later ones count nothing.
        assert loaded["vocabularies"] == ([] if attempt else ["o200k_base"]), attempt
        assert counted in (None, row["details"])
        counted = row["details"]


def test_a_summary_s_size_follows_the_model_the_session_switched_to(db, tmp_path):
    """A size ctxtool counted is shown only under the encoding it was counted with: after the
    session moved from gpt-4o to gpt-4, `context checkpoints` shows cl100k's figure, as a fresh
    import of the same file does, and without loading any vocabulary."""
    pi = tmp_path / "pi.jsonl"
    pi.write_text(_pi_lines("gpt-4o"), encoding="utf-8")
    _fresh(db, "import", "--json", str(pi))
    rows, _ = _fresh(db, "context", "checkpoints", "1", "--json")
    o200k, cl100k = count_text(SUMMARY_JA, "o200k_base"), count_text(SUMMARY_JA, "cl100k_base")
    assert o200k != cl100k
    assert [r["summary_tokens"] for r in rows] == [o200k, o200k]

    with pi.open("a", encoding="utf-8") as f:
        f.write(_pi_switch("gpt-4"))
    again, _ = _fresh(db, "import", "--json", str(pi))
    assert again[0]["added"] == 2
    fresh = tmp_path / "fresh.jsonl"  # the same file under another session id: a new session
    fresh.write_text(pi.read_text(encoding="utf-8").replace("019e19b4-pi", "019e19b4-pj"))
    _fresh(db, "import", "--json", str(fresh))
    for session in ("1", "2"):
        rows, loaded = _fresh(db, "context", "checkpoints", session, "--json")
        assert [r["summary_tokens"] for r in rows] == [cl100k, cl100k], session
        assert loaded == {"openai": False, "vocabularies": []}, session
    # The column keeps what the transcript said of the size: nothing.
    assert db.rows("SELECT DISTINCT summary_tokens FROM agent_compaction") == [
        {"summary_tokens": None}
    ]
