"""Token counting: exact against tiktoken itself, offline, and the `tokens` commands."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import time

import pytest
import tiktoken

from ctxtool.core.errors import CtxtoolError
from ctxtool.core.tokens import (
    REPLY_PRIMING_TOKENS,
    TOKENS_PER_MESSAGE,
    TOKENS_PER_NAME,
    TOKENS_PER_TOOL_CALL,
    MessageText,
    _length_of,
    count_messages,
    count_text,
    encoding_for_model,
    get_encoding,
    token_lengths,
)
from ctxtool.store import Store

from .builders import add_session
from .conftest import SHARED

URLS = {
    "o200k_base": "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken",
    "cl100k_base": "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken",
}
SAMPLES = [
    "hello world",
    "Grüße aus Köln — naïve café",
    "日本語のテキストと中文文本，还有한국어",
    "emoji 🧑🏽‍💻🚀🇫🇷 and ZWJ",
    "def f(x):\n    return x ** 2  # code\n\t\r\n",
    "user text containing <|endoftext|> and <|endofprompt|> and <|fim_prefix|>",
    "",
    " " * 50 + "trailing",
]


@pytest.fixture(scope="module")
def reference():
    """tiktoken's own encodings, loaded through its cache from the shared official files."""
    cache = os.path.join(os.environ.get("TMPDIR", "/tmp"), f"ctxtool-tiktoken-ref-{os.getpid()}")
    os.makedirs(cache, exist_ok=True)
    for name, url in URLS.items():
        shutil.copy(
            SHARED / "tiktoken" / f"{name}.tiktoken",
            os.path.join(cache, hashlib.sha1(url.encode()).hexdigest()),
        )
    old = os.environ.get("TIKTOKEN_CACHE_DIR")
    os.environ["TIKTOKEN_CACHE_DIR"] = cache
    try:
        import tiktoken_ext.openai_public as public

        yield {name: tiktoken.Encoding(**getattr(public, name)()) for name in URLS}
    finally:
        if old is None:
            os.environ.pop("TIKTOKEN_CACHE_DIR", None)
        else:
            os.environ["TIKTOKEN_CACHE_DIR"] = old
        shutil.rmtree(cache, ignore_errors=True)


@pytest.mark.parametrize("name", list(URLS))
def test_shipped_encoding_is_identical_to_tiktokens(name, reference):
    ours, ref = get_encoding(name), reference[name]
    assert ours._pat_str == ref._pat_str
    assert ours._special_tokens == ref._special_tokens
    assert ours._mergeable_ranks == ref._mergeable_ranks
    for text in SAMPLES:
        assert ours.encode_ordinary(text) == ref.encode_ordinary(text)
        assert count_text(text, name) == len(ref.encode(text, disallowed_special=()))


def test_known_counts():
    assert count_text("hello world", "o200k_base") == 2
    assert count_text("hello world", "cl100k_base") == 2
    assert count_text("", "o200k_base") == 0
    # Special-token strings in user data are ordinary text: several tokens, never an error.
    assert count_text("<|endoftext|>", "cl100k_base") > 1


@pytest.mark.parametrize("name", list(URLS))
def test_token_lengths_match_encode_ordinary_on_every_path(name, reference):
    """The count-only encoder (tiktoken's buffer) agrees with encode_ordinary, special-token
    strings included, alone, in the calling thread and spread over threads."""
    ref = reference[name]
    texts = [s * (i % 7 + 1) for i, s in enumerate(SAMPLES * 20)]
    texts += [
        "<|endoftext|>",
        "a<|endofprompt|>b<|fim_prefix|>",
        "",
        " " * 5000,
        "\n\n\r\t",
        "a lone surrogate \ud800 from a lenient JSON parser",
    ]
    expected = [len(ref.encode_ordinary(t)) for t in texts]
    assert len(texts) > 16  # the threaded path
    assert _length_of(get_encoding(name)).__name__ == "buffered"  # not the fallback
    assert token_lengths(texts, name) == expected
    assert token_lengths(texts, name, num_threads=1) == expected
    assert token_lengths(texts, name, num_threads=3) == expected
    assert [token_lengths([t], name)[0] for t in texts[-6:]] == expected[-6:]


def test_token_lengths_without_the_buffer_encoder(reference):
    """A tiktoken without the buffer encoder still counts, through encode_ordinary."""

    class PlainEncoding:  # only the public method, as an older tiktoken offers
        def encode_ordinary(self, text):
            return reference["o200k_base"].encode_ordinary(text)

    texts = SAMPLES * 10
    assert token_lengths(texts, PlainEncoding()) == [
        len(reference["o200k_base"].encode_ordinary(t)) for t in texts
    ]


def test_model_to_encoding():
    assert encoding_for_model("gpt-4o-2024-08-06").name == "o200k_base"
    assert encoding_for_model("gpt-5.1-codex").name == "o200k_base"
    assert encoding_for_model("o3-mini").name == "o200k_base"
    assert encoding_for_model("openai/gpt-4.1").name == "o200k_base"
    assert encoding_for_model("gpt-4-0613").name == "cl100k_base"
    assert encoding_for_model("gpt-3.5-turbo").name == "cl100k_base"
    claude = encoding_for_model("claude-sonnet-4-5")
    assert claude.name == "o200k_base" and claude.estimate
    assert encoding_for_model(None).estimate
    assert encoding_for_model("claude-3", override="cl100k_base").name == "cl100k_base"


def test_message_overhead_follows_the_recipe(reference):
    ref = reference["o200k_base"]
    n = lambda s: len(ref.encode_ordinary(s))  # noqa: E731
    msgs = [
        MessageText("user", "What is the weather in Paris?"),
        MessageText("user", "hi", name="alice"),
        MessageText(
            "assistant",
            None,
            tool_calls=[
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
                },
                {
                    "id": "call_2",
                    "type": "function",
                    "function": {"name": "get_time", "arguments": {"tz": "CET"}},
                },
            ],
        ),
        MessageText("tool", "18°C, cloudy"),
    ]
    counts = count_messages(msgs, "o200k_base")
    assert counts[0] == TOKENS_PER_MESSAGE + n("user") + n("What is the weather in Paris?")
    assert counts[1] == TOKENS_PER_MESSAGE + n("user") + n("hi") + TOKENS_PER_NAME + n("alice")
    assert counts[2] == (
        TOKENS_PER_MESSAGE
        + n("assistant")
        + 2 * TOKENS_PER_TOOL_CALL
        + n("get_weather")
        + n('{"city": "Paris"}')
        + n("get_time")
        + n('{"tz": "CET"}')
    )
    assert counts[3] == TOKENS_PER_MESSAGE + n("tool") + n("18°C, cloudy")
    assert REPLY_PRIMING_TOKENS == 3


def test_huge_message_counts_exactly(reference):
    text = "lorem ipsum dolor sit amet, 数字 12345 🚀\n" * 120_000  # ~5 MB
    assert len(text.encode()) > 5_000_000
    [count] = count_messages([MessageText("user", text)], "cl100k_base")
    ref = reference["cl100k_base"]
    assert count == TOKENS_PER_MESSAGE + len(ref.encode_ordinary("user")) + len(
        ref.encode_ordinary(text)
    )


def test_counts_offline_out_of_the_box(tmp_path):
    """A fresh process, no cache, every network route dead: shipped encodings still count."""
    env = dict(
        os.environ,
        TIKTOKEN_CACHE_DIR=str(tmp_path / "empty-cache"),
        HTTPS_PROXY="http://127.0.0.1:9",
        HTTP_PROXY="http://127.0.0.1:9",
        https_proxy="http://127.0.0.1:9",
        http_proxy="http://127.0.0.1:9",
    )
    code = (
        "from ctxtool.core.tokens import count_text; "
        "print(count_text('hello world', 'o200k_base'), count_text('hello world', 'cl100k_base'))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["2", "2"]
    code = "from ctxtool.core.tokens import get_encoding; get_encoding('r50k_base')"
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120
    )
    assert out.returncode != 0
    assert "TIKTOKEN_CACHE_DIR" in out.stderr


def test_unknown_encoding_is_a_clear_error():
    with pytest.raises(CtxtoolError, match="unknown encoding"):
        get_encoding("no_such_encoding")


MESSAGES = [
    {"role": "user", "content": "Fix the failing test in src/app.py"},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "c1",
                "type": "function",
                "function": {"name": "read", "arguments": '{"path": "src/app.py"}'},
            }
        ],
    },
    {"role": "tool", "content": "def main():\n    return 1/0\n", "tool_call_id": "c1"},
    {"role": "assistant", "content": "Division by zero; fixing. 🚀 <|endoftext|>"},
]


def _expected(msgs, encoding):
    return count_messages(
        [
            MessageText(m["role"], m.get("content"), m.get("name"), m.get("tool_calls"))
            for m in msgs
        ],
        encoding,
    )


def test_cli_count_fills_resumes_and_recounts(db, cli):
    add_session(db, 1, MESSAGES, model="gpt-4o")
    add_session(db, 2, MESSAGES[:2], model="gpt-4-0613")
    add_session(db, 3, MESSAGES[:1], model="claude-sonnet-4-5")

    result = cli("--db", db.url, "tokens", "count", "--all", "--json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["messages_counted"] == 7
    assert doc["by_encoding"] == {"o200k_base": 5, "cl100k_base": 2}
    rows = db.rows("SELECT session_id, token_count, token_encoding FROM agent_message ORDER BY id")
    assert [r["token_count"] for r in rows[:4]] == _expected(MESSAGES, "o200k_base")
    assert [r["token_count"] for r in rows[4:6]] == _expected(MESSAGES[:2], "cl100k_base")
    assert {r["token_encoding"] for r in rows[4:6]} == {"cl100k_base"}

    result = cli("--db", db.url, "tokens", "count", "--all", "--json")
    assert json.loads(result.stdout)["messages_counted"] == 0

    # Another encoding: every message of the session is recounted with it.
    result = cli("--db", db.url, "tokens", "count", "1", "--encoding", "cl100k_base", "--json")
    assert json.loads(result.stdout)["messages_counted"] == 4
    rows = db.rows("SELECT token_count FROM agent_message WHERE session_id = 1 ORDER BY id")
    assert [r["token_count"] for r in rows] == _expected(MESSAGES, "cl100k_base")
    # Back to the session model's encoding, found as "counted with another encoding".
    result = cli("--db", db.url, "tokens", "count", "--all", "--json")
    assert json.loads(result.stdout)["messages_counted"] == 4

    result = cli("--db", db.url, "tokens", "count", "1", "--recount", "--json")
    assert json.loads(result.stdout)["messages_counted"] == 4


def test_interrupted_count_loses_nothing(db):
    add_session(db, 1, MESSAGES * 5, model="gpt-4o")

    class Interrupted(Exception):
        pass

    def stop(_n):
        raise Interrupted

    with pytest.raises(Interrupted):
        Store(db.engine).count_tokens(batch_size=6, on_batch=stop)
    assert db.scalar("SELECT COUNT(*) FROM agent_message WHERE token_count IS NOT NULL") == 6
    result = Store(db.engine).count_tokens(batch_size=6)
    assert result.messages_counted == 14
    assert db.scalar("SELECT COUNT(*) FROM agent_message WHERE token_count IS NULL") == 0


def test_cli_count_usage_errors(db, cli):
    result = cli("--db", db.url, "tokens", "count")
    assert result.exit_code == 2
    result = cli("--db", db.url, "tokens", "count", "--session", "99")
    assert result.exit_code == 1 and "session 99 does not exist" in result.output


def test_an_unknown_encoding_is_a_usage_error_naming_the_known_ones(db, cli):
    add_session(db, 1, MESSAGES, model="gpt-4o")
    for args in (["tokens", "count", "--all"], ["tokens", "report"], ["compact", "--all"]):
        result = cli("--db", db.url, *args, "--encoding", "nope")
        assert result.exit_code == 2, (args, result.output)
        error = result.output.strip().splitlines()[-1]
        assert error.startswith("Error: Invalid value for '--encoding': unknown encoding 'nope'")
        assert "o200k_base" in error and "cl100k_base" in error
        assert "Plugins found" not in result.output and "tiktoken version" not in result.output
    assert db.scalar("SELECT COUNT(*) FROM agent_message WHERE token_count IS NOT NULL") == 0
    assert (
        cli("--db", db.url, "tokens", "count", "--all", "--encoding", "cl100k_base").exit_code == 0
    )


def test_cli_report(db, cli):
    add_session(db, 1, MESSAGES, model="gpt-4o", system_prompt="You are a coding agent.")
    cli("--db", db.url, "tokens", "count", "--all")
    result = cli("--db", db.url, "tokens", "report", "--json")
    assert result.exit_code == 0, result.output
    [row] = json.loads(result.stdout)
    history = sum(_expected(MESSAGES, "o200k_base"))
    assert row["history_tokens"] == history
    system = _expected([{"role": "system", "content": "You are a coding agent."}], "o200k_base")[0]
    assert row["effective_tokens"] == history + system + REPLY_PRIMING_TOKENS
    assert row["messages"] == 4 and row["compactions"] == 0 and row["encoding"] == "o200k_base"
    result = cli("--db", db.url, "tokens", "report")
    assert "context" in result.output.split("\n")[0]


def test_report_history_adds_only_counts_made_with_the_encoding_it_reports(db, cli):
    add_session(db, 1, MESSAGES, model="gpt-4o")
    add_session(db, 2, MESSAGES[:2], model="gpt-4o")
    cli("--db", db.url, "tokens", "count", "1", "--encoding", "cl100k_base")
    cli("--db", db.url, "tokens", "count", "2")
    with db.engine.begin() as conn:  # one of session 2's counts made with another encoding
        conn.exec_driver_sql(
            "UPDATE agent_message SET token_encoding = 'cl100k_base' WHERE id = "
            "(SELECT MIN(id) FROM (SELECT id FROM agent_message WHERE "
            "session_id = 2) AS s)"
        )

    def report(*args):
        result = cli("--db", db.url, "tokens", "report", *args, "--json")
        assert result.exit_code == 0, result.output
        return {r["session_id"]: r for r in json.loads(result.stdout)}

    rows = report()  # o200k_base, gpt-4o's: session 1's cl100k_base counts are not its counts
    assert (rows[1]["history_tokens"], rows[1]["uncounted"], rows[1]["messages"]) == (0, 4, 4)
    assert (rows[2]["history_tokens"], rows[2]["uncounted"]) == (
        _expected(MESSAGES[:2], "o200k_base")[1],
        1,
    )
    rows = report("--encoding", "cl100k_base")
    assert (rows[1]["history_tokens"], rows[1]["uncounted"]) == (
        sum(_expected(MESSAGES, "cl100k_base")),
        0,
    )
    assert rows[1]["compression"] is not None and rows[2]["uncounted"] == 1
    # What counting finds left to do agrees with the report.
    result = cli("--db", db.url, "tokens", "count", "--all", "--json")
    assert json.loads(result.stdout)["messages_counted"] == 5
    assert {r["uncounted"] for r in report().values()} == {0}


@pytest.mark.parametrize("placeholder", [-1000000, -1, 0, 2**31 - 1])
def test_a_count_no_message_can_have_is_no_count(db, cli, placeholder):
    """A runtime may write -1 or 0 for "unknown", or INT's largest: none is a message's count
    (every message costs its framing; no row holds 2**30 bytes), so each is recounted, never
    added up: a session of such counts would otherwise never look over its window."""
    ids = add_session(db, 1, MESSAGES, model="gpt-4o")
    cli("--db", db.url, "tokens", "count", "--all")
    expected = _expected(MESSAGES, "o200k_base")
    with db.engine.begin() as conn:
        conn.exec_driver_sql(
            f"UPDATE agent_message SET token_count = {placeholder} WHERE id = {ids[0]}"
        )
    [row] = json.loads(cli("--db", db.url, "tokens", "report", "--json").stdout)
    assert (row["history_tokens"], row["uncounted"]) == (sum(expected[1:]), 1)
    assert row["effective_tokens"] == sum(expected) + REPLY_PRIMING_TOKENS  # counted, not -1M
    shown = json.loads(cli("--db", db.url, "context", "show", "1", "--json").stdout)
    assert [m["token_count"] for m in shown["messages"]][0] in (None, expected[0])
    result = cli("--db", db.url, "tokens", "count", "--all", "--json")
    assert json.loads(result.stdout)["messages_counted"] == 1, result.output
    with db.engine.connect() as conn:
        assert (
            conn.exec_driver_sql(
                f"SELECT token_count FROM agent_message WHERE id = {ids[0]}"
            ).scalar()
            == expected[0]
        )


ODD_TOOL_CALLS = [{"a": 1}, ["call_1"], [None], 42, "str", [{"id": 5, "function": "x"}]]


def test_odd_tool_calls_a_runtime_wrote_are_reported_and_never_crash(db, cli):
    """A runtime writes the tool_calls JSON column directly: validate names each odd row, and
    counting, reports and the restored context carry on (issue #9 item 11)."""
    rows = [{"role": "user", "content": "go"}]
    rows += [{"role": "assistant", "content": "x", "tool_calls": odd} for odd in ODD_TOOL_CALLS]
    rows += [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "ok1", "type": "function", "function": {"name": "read", "arguments": "{}"}}
            ],
        },
        {"role": "tool", "tool_call_id": "ok1", "content": "fine"},
    ]
    ids = add_session(db, 1, rows)
    result = cli("--db", db.url, "validate", "--json")
    assert result.exit_code == 1, result.output
    issues = json.loads(result.stdout)
    flagged = {i["message_id"] for i in issues if i["rule"] == "malformed_tool_calls"}
    assert flagged == set(ids[1 : 1 + len(ODD_TOOL_CALLS)])
    assert all("Traceback" not in i["message"] for i in issues)
    for args in (
        ["tokens", "count", "--all"],
        ["tokens", "report", "--json"],
        ["context", "show", "1", "--json"],
    ):
        result = cli("--db", db.url, *args)
        assert result.exit_code == 0, (args, result.output)
    counts = db.rows("SELECT token_count FROM agent_message ORDER BY id")
    assert all(r["token_count"] for r in counts)
    # The well-formed call costs its overhead, name and arguments; an odd one only its text.
    assert counts[-2]["token_count"] > counts[1]["token_count"]


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork is a POSIX call")
def test_token_lengths_work_in_a_forked_child():
    """The encoding threads do not survive a fork: a child (multiprocessing's default on
    Linux) must count with threads of its own instead of waiting on the parent's forever."""
    texts = ["hello world"] * 64
    expected = token_lengths(texts, "o200k_base")  # the parent's pool now exists
    pid = os.fork()
    if pid == 0:  # the child: exit 0 only if it counted right
        try:
            os._exit(0 if token_lengths(texts, "o200k_base") == expected else 1)
        finally:
            os._exit(2)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            assert os.waitstatus_to_exitcode(status) == 0
            return
        time.sleep(0.05)
    os.kill(pid, 9)
    os.waitpid(pid, 0)
    pytest.fail("the forked child hung counting tokens")


def test_stored_counts_land_on_their_own_messages(db, monkeypatch):
    """Counts written for many messages at once (statements of a few rows each on MySQL, one
    row per statement on SQLite) each reach the message they belong to."""
    from ctxtool.db.dialects import MySQL
    from ctxtool.store.counts import store_counts

    monkeypatch.setattr(MySQL, "COUNTS_PER_STATEMENT", 3)
    ids = add_session(db, 1, [{"role": "user", "content": f"m{i}"} for i in range(11)])
    counts = [1000 + 7 * k for k in range(len(ids))]
    with db.engine.begin() as conn:
        store_counts(conn, ids[::-1], counts[::-1], "cl100k_base")  # any order
        store_counts(conn, [], [], "cl100k_base")  # nothing to write: no statement
    rows = db.rows("SELECT id, token_count, token_encoding FROM agent_message ORDER BY id")
    assert [(r["id"], r["token_count"], r["token_encoding"]) for r in rows] == [
        (i, n, "cl100k_base") for i, n in zip(ids, counts)
    ]


def test_counting_from_an_atexit_handler_still_counts(tmp_path):
    """At interpreter shutdown no thread pool takes new work: a count made by an atexit handler
    (a tool flushing its figures on exit) is done in the calling thread, exactly."""
    script = tmp_path / "at_exit.py"
    script.write_text(
        "import atexit\n"
        "from ctxtool.core.tokens import get_encoding, token_lengths\n"
        "def at_exit():\n"
        "    texts = [f'text number {i} with some words' for i in range(100)]\n"
        "    enc = get_encoding('o200k_base')\n"
        "    got = token_lengths(texts, enc, num_threads=2)\n"
        "    assert got == [len(enc.encode_ordinary(t)) for t in texts]\n"
        "    print('counted', sum(got))\n"
        "atexit.register(at_exit)\n"
    )
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    assert done.stdout.startswith("counted ")
