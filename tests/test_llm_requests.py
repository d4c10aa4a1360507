"""No LLM work thrown away, and a local server's limits (issue #43), against the stand-in server
tests/llm_server.py through `ctxtool compact` and the real ``openai`` client: a cut answer
asked once for a shorter one; the cap a cut answer names is the one that cut it; a chunk a
server failed part-way retried alone; Retry-After honoured; no more requests at once than the
server's slots; ``--fallback extractive`` when the LLM fails or is refused."""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time
from pathlib import Path

from ctxtool.store import Store

from .builders import LIMITS, add_session, coding_session
from .compacting import compact_at, compact_with_llm
from .llm_server import FakeLLM

ROOT = Path(__file__).resolve().parents[1]


def test_a_cut_answer_is_asked_once_for_a_shorter_one_and_written(db, cli):
    add_session(db, 1, coding_session(12), model="gpt-4o")
    with FakeLLM() as llm:
        llm.mode = "length_once"
        result = compact_with_llm(cli, db, llm, "1", "--json")
        posts = llm.requests
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert out["status"] == "compacted" and out["summarizer_requests"] == 2
    assert any("a shorter one was asked" in n for n in out["notes"])
    first, again = (post["messages"][1]["content"] for post in posts)
    conversation = first.split("</conversation>")[0] + "</conversation>"
    assert conversation in again and "was cut off" in again
    assert "State rules" in first and "Rules: be brief." in again  # the brief format
    assert posts[1]["max_tokens"] == posts[0]["max_tokens"]


def test_an_answer_cut_twice_is_refused_naming_the_cap_that_cut_it(db, cli):
    """The issue's run: --summary-input-tokens 3000 --max-summary-tokens 3000 was refused for
    "max_tokens=1000 ... raise --max-summary-tokens", the flag just raised. The cap of 1000 is
    a third of the input bound (the summary must fit the next compaction's request): the line
    now says so, and names --summary-input-tokens."""
    add_session(db, 1, coding_session(12), model="gpt-4o")
    with FakeLLM() as llm:
        llm.mode = "length"
        result = compact_with_llm(
            cli,
            db,
            llm,
            "1",
            "--context-window",
            "40000",
            "--summary-input-tokens",
            "3000",
            "--max-summary-tokens",
            "3000",
            "--force",
        )
        assert len(llm.requests) == 2
    assert result.exit_code == 1
    assert "cut at max_tokens=1000 twice" in result.output
    assert "third of the summarizer's input bound of 3000" in result.output
    assert "raise --summary-input-tokens" in result.output
    assert "raise --max-summary-tokens" not in result.output


def test_a_server_error_mid_fold_retries_that_chunk_not_the_fold(db, cli):
    """Five chunks; the server answers the third request with 503: that request is asked
    again, the chunks before are not."""
    add_session(db, 1, coding_session(30), model="gpt-4o")
    with FakeLLM() as llm:
        llm.failures.extend([200, 200, 503])
        result = compact_with_llm(
            cli,
            db,
            llm,
            "1",
            "--force",
            "--context-window",
            "60000",
            "--summary-input-tokens",
            "3000",
            "--retries",
            "2",
            "--json",
        )
        prompts = [r["messages"][1]["content"] for r in llm.requests]
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert out["summarizer_requests"] == len(prompts) - 1 >= 4
    assert prompts[2] == prompts[3]  # the failed request, asked again
    assert len(set(prompts)) == len(prompts) - 1  # and nothing else twice


def test_429_and_503_wait_for_the_servers_retry_after(db, cli):
    add_session(db, 1, coding_session(12), model="gpt-4o")
    with FakeLLM() as llm:
        llm.failures.extend([429, 503])
        llm.retry_after = {"retry-after": "1"}
        started = time.monotonic()
        result = compact_with_llm(cli, db, llm, "1", "--retries", "2")
        waited = time.monotonic() - started
        assert len(llm.requests) == 3
    assert result.exit_code == 0, result.output
    assert waited >= 2.0


def test_workers_queue_for_a_servers_few_slots_instead_of_timing_out(db, cli):
    """A llama.cpp server with 2 slots queues the rest; with eight workers each request would
    wait there behind the others, its timeout running. /props says total_slots: the workers
    wait here instead, and no request times out."""
    for sid in range(1, 7):
        add_session(db, sid, coding_session(12), model="gpt-4o")
    with FakeLLM(delay=0.6) as llm:
        llm.props = {"total_slots": 2, "default_generation_settings": {"n_ctx": 32768}}
        llm.slots = 2
        result = compact_at(
            cli,
            db,
            llm.base_url,
            "smollm2",
            "--all",
            "--workers",
            "8",
            "--retries",
            "0",
            "--timeout",
            "1.5",
            *LIMITS,
            env={"CTXTOOL_PROGRESS_INTERVAL": "0.2"},
        )
        assert llm.most_at_once <= 2
    assert result.exit_code == 0, result.output
    assert "6 session(s) over threshold, 6 compacted" in result.output
    assert "waiting for the server (" in result.output and "queued)" in result.output


def test_fallback_extractive_writes_when_the_llm_fails(db, cli):
    """The LLM down for good: every over-window session is compacted by the extractive
    summarizer, the checkpoint records it with the LLM's failure, the output names each."""
    for sid in (1, 2):
        add_session(db, sid, coding_session(12), model="gpt-4o")
    with FakeLLM() as llm:
        llm.failures.extend([500] * 10)
        result = compact_with_llm(cli, db, llm, "--all", "--fallback", "extractive")
    assert result.exit_code == 0, result.output
    store = Store(db.engine)
    for sid in (1, 2):
        checkpoint = store.latest_compaction(sid)
        assert checkpoint.summarizer == "extractive"
        assert "HTTP 500" in checkpoint.details["fallback_from"]["reason"]
        assert store.context_tokens(sid) <= 5000
        assert f"session {sid}: fell back to extractive: openai failed:" in result.output


def test_fallback_extractive_writes_when_the_llm_summary_is_refused(db, cli, tmp_path):
    """A summary the gate refuses (too long), from the config file's fallback key."""
    add_session(db, 1, coding_session(12), model="gpt-4o")
    config = tmp_path / "ctxtool.toml"
    config.write_text('[compact]\nfallback = "extractive"\n')
    with FakeLLM() as llm:
        llm.mode = "long"
        result = cli(
            "--config",
            str(config),
            "--db",
            db.url,
            "compact",
            "1",
            "--summarizer",
            "openai",
            "--model",
            "m",
            "--base-url",
            llm.base_url,
            "--retries",
            "0",
            *LIMITS,
            "--json",
        )
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert out["status"] == "compacted" and out["summarizer"] == "extractive"
    assert out["fell_back"].startswith("openai's summary was rejected")
    checkpoint = Store(db.engine).latest_compaction(1)
    assert checkpoint.summarizer == "extractive"


def test_without_fallback_a_failing_llm_writes_nothing(db, cli):
    add_session(db, 1, coding_session(12), model="gpt-4o")
    with FakeLLM() as llm:
        llm.failures.extend([500] * 10)
        result = compact_with_llm(cli, db, llm, "--all")
    assert result.exit_code == 4
    assert db.scalar("SELECT COUNT(*) FROM agent_compaction") == 0


def test_the_cron_script_falls_back_to_extractive_when_the_llm_is_down(sqlite_db):
    """scripts/cron-compact.sh against an LLM answering 500: the session still comes under its
    window (extractive), and the log line names it and why."""
    db = sqlite_db
    add_session(db, 1, coding_session(12), model="gpt-4o")
    with FakeLLM() as llm:
        llm.failures.extend([500] * 20)
        env = {
            "PATH": "/usr/bin:/bin",
            "HOME": os.environ.get("HOME", "/tmp"),
            "CTXTOOL_DATABASE_URL": db.url,
            "CTXTOOL_COMPACT_OLDER_THAN": "0s",
            "OPENAI_BASE_URL": llm.base_url,
            "CTXTOOL_SUMMARY_MODEL": "smollm2",
        }
        out = subprocess.run(
            [str(ROOT / "scripts" / "cron-compact.sh"), *LIMITS, "--retries", "0"],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert out.returncode == 0, out.stdout + out.stderr
    rows = [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]
    assert [(r["status"], r["summarizer"]) for r in rows] == [("compacted", "extractive")]
    assert rows[0]["fell_back"].startswith("openai failed: summarizer answered HTTP 500")
    assert Store(db.engine).latest_compaction(1).summarizer == "extractive"


def _echoing_server() -> str:
    """An OpenAI-compatible proxy that refuses the key and echoes it in its error (LiteLLM-
    style 'Received API Key = ...'), for every path."""
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Handler(BaseHTTPRequestHandler):
        def _answer(self):
            length = int(self.headers.get("content-length") or 0)
            self.rfile.read(length)
            key = (self.headers.get("authorization") or "").removeprefix("Bearer ")
            body = json.dumps(
                {"error": {"message": f"Invalid proxy token. Received API Key = {key}"}}
            ).encode()
            self.send_response(401)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_GET = do_POST = _answer

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return f"http://127.0.0.1:{server.server_address[1]}/v1"


def test_an_llm_error_echoing_the_key_is_neither_printed_nor_stored(db, cli):
    """The LLM's failure is printed per session and, with --fallback, stored in the
    checkpoint (details.fallback_from.reason): a proxy that echoes the refused key has it
    masked in both."""
    secret = "sk-proj-Zq8vN3xR7tY2uK9pL4mW6sB1dF5gH0jQ"
    add_session(db, 1, coding_session(12), model="gpt-4o")
    result = compact_at(
        cli,
        db,
        _echoing_server(),
        "m",
        "1",
        "--retries",
        "0",
        *LIMITS,
        "--fallback",
        "extractive",
        env={"OPENAI_API_KEY": secret},
    )
    assert result.exit_code == 0, result.output
    checkpoint = Store(db.engine).latest_compaction(1)
    assert checkpoint.summarizer == "extractive"
    assert secret not in str(checkpoint.details), checkpoint.details["fallback_from"]
    assert secret not in result.output


def test_an_answer_read_as_json_gives_what_the_clients_models_give():
    """The summarizer reads the answer's JSON itself (no ChatCompletion built for every
    request): each field it reads has the value ChatCompletion.construct gives, for an
    ordinary answer and for odd ones (fields missing, null, of another type)."""
    from openai.types.chat import ChatCompletion

    from ctxtool.compaction.summarizers.openai import _read_completion

    def fields(response):
        choices = getattr(response, "choices", "-")
        read = {"model": getattr(response, "model", None), "choices": "-"}
        usage = getattr(response, "usage", None)
        read["usage"] = [getattr(usage, k, None) for k in ("prompt_tokens", "completion_tokens")]
        if isinstance(choices, list):
            read["choices"] = [
                [
                    getattr(getattr(c, "message", None), "content", "-"),
                    getattr(c, "finish_reason", None),
                    getattr(c, "message", None) is None,
                ]
                for c in choices
            ]
        return read

    ordinary = {
        "id": "x",
        "model": "m",
        "choices": [{"index": 0, "finish_reason": "stop", "message": {"content": "## Goal"}}],
        "usage": {"prompt_tokens": 12, "completion_tokens": 3, "total_tokens": 15},
    }
    answers = [
        ordinary,
        {**ordinary, "usage": None},
        {**ordinary, "usage": 5},
        {"choices": []},
        {"choices": [{"message": None}, {"finish_reason": "length"}, "odd", {"message": {}}]},
        {"choices": [{"message": {"content": 5}}], "usage": {"prompt_tokens": "9"}},
    ]
    for answer in answers:
        assert fields(_read_completion(answer, ChatCompletion)) == fields(
            ChatCompletion.construct(**answer)
        ), answer
    # Without choices: as the client builds it (choices None: "no message").
    read = _read_completion({"id": "x"}, ChatCompletion)
    assert read.choices is None and str(read) == str(ChatCompletion.construct(id="x"))
    # No JSON object: as it is, for the message that says it is no chat completion.
    for answer in ([1, 2], "text", None):
        read = _read_completion(answer, ChatCompletion)
        assert not hasattr(read, "choices") and str(read) == str(answer)


GOOD_SUMMARY = "## Goal\nFix the bug.\n\n## Current work\nNothing yet.\n"


def _completion(content: object = GOOD_SUMMARY, **fields: object) -> dict:
    return {
        "id": "x",
        "object": "chat.completion",
        "model": "m",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content}}],
        **fields,
    }


def test_odd_answers_are_unusable_and_the_fallback_applies(db, cli):
    """Answers of another shape than a chat completion's (a message that is a string, choices
    that are an object, JSON nested past what a parser reads) end in one line saying the
    response is unusable and why, never an internal error; --fallback extractive then
    writes."""
    odd = {
        "its first choice's message is a string, not an object": {
            "choices": [{"message": "hello", "finish_reason": "stop"}]
        },
        "its choices are an object, not a list": {
            "choices": {"0": {"message": {"content": GOOD_SUMMARY}}}
        },
        "its first choice is a number, not an object": {"choices": [7]},
        "its JSON is nested too deeply to read": "[" * 100_000 + "]" * 100_000,
    }
    for sid, (why, body) in enumerate(odd.items(), start=1):
        add_session(db, sid, coding_session(12), model="gpt-4o")
        with FakeLLM() as llm:
            llm.answer_body = body
            failed = compact_with_llm(cli, db, llm, str(sid))
            fell_back = compact_with_llm(cli, db, llm, str(sid), "--fallback", "extractive")
        assert failed.exit_code == 1, failed.output
        assert f"unusable summarizer response (model m at {llm.base_url}): {why}" in failed.output
        assert "internal error" not in failed.output + fell_back.output
        assert fell_back.exit_code == 0, fell_back.output
        checkpoint = Store(db.engine).latest_compaction(sid)
        assert checkpoint.summarizer == "extractive"
        assert why in checkpoint.details["fallback_from"]["reason"]


def test_an_error_object_under_200_says_the_servers_words_masked(db, cli):
    """An answer carrying an error object instead of choices says what the server said, the
    key it echoed masked, and the fallback applies."""
    secret = "sk-proj-ABCDEFGHIJKLMNOPQRSTUVWX123456"
    add_session(db, 1, coding_session(12), model="gpt-4o")
    with FakeLLM() as llm:
        llm.answer_body = {"error": {"message": f"overloaded, key {secret} refused"}}
        failed = compact_with_llm(cli, db, llm, "1", env={"OPENAI_API_KEY": secret})
        fell_back = compact_with_llm(
            cli, db, llm, "1", "--fallback", "extractive", env={"OPENAI_API_KEY": secret}
        )
    assert failed.exit_code == 1, failed.output
    assert (
        f"summarizer answered an error (model m at {llm.base_url}): overloaded, key"
        in failed.output
    )
    assert "has no message" not in failed.output
    assert secret not in failed.output + fell_back.output
    assert fell_back.exit_code == 0, fell_back.output
    reason = Store(db.engine).latest_compaction(1).details["fallback_from"]["reason"]
    assert reason.startswith("openai failed: summarizer answered an error") and secret not in reason


def test_a_model_the_answer_names_is_recorded_only_when_it_is_a_name(db, cli):
    """The answer's ``model`` is what the checkpoint records when it is a string; an object or
    a number there is no model name: the one asked for is recorded."""
    for sid, named in ((1, {"x": 1}), (2, 12345), (3, "m-2024-08-06")):
        add_session(db, sid, coding_session(12), model="gpt-4o")
        with FakeLLM() as llm:
            llm.answer_body = _completion(model=named)
            result = compact_with_llm(cli, db, llm, str(sid), "--min-quality", "0")
        assert result.exit_code == 0, result.output
        checkpoint = Store(db.engine).latest_compaction(sid)
        assert checkpoint.summarizer == "openai"
        assert checkpoint.summarizer_model == (named if isinstance(named, str) else "m")
