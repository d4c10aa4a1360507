"""The LLM summarizer against a real server no one here wrote (issue #43): llama.cpp through
llama-cpp-python with SmolLM2-135M-Instruct (tests/real_llm.py, scripts/local-llm.sh; a window
of 2,048 tokens), through `ctxtool compact` and the real ``openai`` client. Few and short:
small spans, small answers; each request the model reads costs about a minute on a loaded
2-core machine.

The issue's three scenarios: a span past the model's window (the window learned from the
server's 400, never the 400 in the report); an answer cut at its cap (asked once for a shorter
one, then refused naming the setting); the quality gate meeting the model's answer (the
revision really sent and answered, the outcome line and the exit code), with the extractive
fallback behind it. And the model's own summary through the whole path: written when the
gate accepts it, else the extractive one with the LLM's failure recorded."""

from __future__ import annotations

import json

import pytest

from ctxtool.compaction.summarizers import OpenAISummarizer
from ctxtool.compaction.summarizers.base import SummaryRequest
from ctxtool.core.evaluator import fabrications
from ctxtool.core.evaluator.answers import normalise
from ctxtool.core.records import Message
from ctxtool.store import Store

from .builders import add_session, coding_session
from .compacting import compact_at
from .real_llm import LocalLLM, real_llm  # noqa: F401 - the session fixture

pytestmark = pytest.mark.real_llm

SMALL = ["--context-window", "4000", "--reserve-tokens", "500", "--keep-recent-tokens", "30"]

# One request about parser.py, its fix, and a later request kept verbatim: 73 tokens to
# summarize, a prompt of about a thousand (the instructions).
PARSER_SESSION = [
    {
        "role": "user",
        "content": "Please fix parser.py so that it accepts empty lines instead of raising "
        "ValueError.",
    },
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "c1",
                "type": "function",
                "function": {"name": "read", "arguments": json.dumps({"path": "parser.py"})},
            }
        ],
    },
    {
        "role": "tool",
        "tool_call_id": "c1",
        "content": "def parse(line):\n    key, value = line.split('=')\n"
        "    return key.strip(), value.strip()",
    },
    {"role": "assistant", "content": "parser.py now skips empty lines before splitting."},
    {
        "role": "user",
        "content": "Thanks. Now add a test for the empty line case in test_parser.py.",
    },
    {"role": "assistant", "content": "Adding the test to test_parser.py now."},
]


def _parser_source() -> str:
    """parser.py as the agent read it: a small module of about 300 tokens."""
    lines = ['"""Read key=value settings files."""', "", "import re", ""]
    lines.append("COMMENT = re.compile(r'^\\s*#')")
    for name in ("host", "port", "user", "timeout", "retries", "log_level"):
        lines += [
            "",
            f"def read_{name}(settings):",
            f"    # The {name} setting, or None when the file does not set it.",
            f"    return settings.get('{name}')",
        ]
    lines += [
        "",
        "def parse(line):",
        "    key, value = line.split('=')",
        "    return key.strip(), value.strip()",
        "",
        "def parse_file(path):",
        "    with open(path) as f:",
        "        return dict(parse(line) for line in f if not COMMENT.match(line))",
    ]
    return "\n".join(lines)


# The request and its answer without the read between them: 33 tokens to summarize. SmolLM2
# (llama-cpp-python 0.3.36 as built on 2026-12-07) runs past any cap on PARSER_SESSION's
# prompt, and ends its answer on this one.
PLAIN_SESSION = [PARSER_SESSION[0], *PARSER_SESSION[3:]]


# The same request with the module read whole: about 400 tokens to summarize, so that a
# summary of a few sentences is smaller than what it replaces.
READ_SESSION = [
    PARSER_SESSION[0],
    PARSER_SESSION[1],
    {"role": "tool", "tool_call_id": "c1", "content": _parser_source()},
    *PARSER_SESSION[3:],
]


@pytest.fixture
def llm(real_llm: LocalLLM) -> LocalLLM:  # noqa: F811 - the fixture imported above, by name
    return real_llm


def compact(cli, db, llm: LocalLLM, *args: str):
    return compact_at(
        cli,
        db,
        llm.base_url,
        llm.model,
        "1",
        "--force",
        "--retries",
        "0",
        "--timeout",
        "900",
        *args,
    )


def test_a_span_past_the_window_is_folded_inside_it(sqlite_db, cli, llm):
    """The issue's first run sent the whole span (past the model's window) and reported the
    server's 400. Here the server's 400 states its window: learned, the span folded inside
    it, the model's answers judged; with --fallback extractive the session is compacted
    whatever the model made of it, the window and the LLM's failure in the checkpoint."""
    db = sqlite_db
    add_session(db, 1, coding_session(8), model="gpt-4o")
    result = compact(cli, db, llm, *SMALL, "--fallback", "extractive", "--json")
    assert result.exit_code == 0, result.output
    assert "HTTP 400" not in result.output
    out = json.loads(result.stdout)
    assert out["status"] == "compacted" and out["summarizer"] == "extractive"
    checkpoint = Store(db.engine).latest_compaction(1)
    assert checkpoint.summarizer == "extractive"
    failure = checkpoint.details["fallback_from"]
    assert failure["summary_window"]["tokens"] == llm.window
    assert failure["summary_window"]["source"] == "stated by the server's context-length error"
    assert "HTTP 400" not in failure["reason"]


def test_an_answer_cut_at_its_cap_is_asked_once_for_a_shorter_one(sqlite_db, cli, llm):
    """SmolLM2 writes past 100 tokens for anything: cut, asked once for a shorter answer, cut
    again, and refused naming the setting that set the cap; nothing written."""
    db = sqlite_db
    add_session(db, 1, PARSER_SESSION, model="gpt-4o")
    result = compact(cli, db, llm, *SMALL, "--max-summary-tokens", "100")
    assert result.exit_code == 1
    assert "cut at max_tokens=100 twice, the second time asked for at most 66 tokens" in (
        result.output
    )
    assert "the cap is --max-summary-tokens: raise it" in result.output
    assert db.scalar("SELECT COUNT(*) FROM agent_compaction") == 0


def test_the_gate_judges_the_real_answer_and_its_revision(sqlite_db, cli, llm):
    """33 tokens to summarize: whatever the model writes is longer, and the gate refuses it.
    llama-cpp-python gets the brief prompt (SmolLM2 repeats itself past any cap given the
    full one), so the model's answer ends and is judged. It is sent back once with what it
    missed (a second request, answered: the revised summary's size is in the reason), refused
    again; the extractive fallback's summary is judged by the same gate (over 33 tokens too,
    refused). The outcome line says all of it, the exit code is 1, nothing is written."""
    db = sqlite_db
    add_session(db, 1, PLAIN_SESSION, model="gpt-4o")
    result = compact(
        cli, db, llm, *SMALL, "--max-summary-tokens", "400", "--fallback", "extractive"
    )
    assert result.exit_code == 1
    assert "session 1: rejected" in result.output
    assert "note: revised once: the first answer missed" in result.output
    assert "fell back to extractive: openai's summary was rejected: summary (" in result.output
    assert "is not smaller than what it replaces (33 tokens)" in result.output
    assert "quality:" in result.output and "fabrications" in result.output
    assert db.scalar("SELECT COUNT(*) FROM agent_compaction") == 0


def test_the_model_s_own_summary_is_written_or_the_extractive_one_with_its_failure(
    sqlite_db, cli, llm
):
    """A small span and a small answer: the model's summary, judged by the gate (no
    fabrication) and written as the checkpoint; or, refused or failed, the extractive summary
    written instead with the LLM's failure in its details. Either way the session is
    compacted, exit 0, the checkpoint the one the output names."""
    db = sqlite_db
    add_session(db, 1, READ_SESSION, model="gpt-4o")
    result = compact(
        cli,
        db,
        llm,
        *SMALL,
        "--max-summary-tokens",
        "160",
        "--min-quality",
        "0",
        "--fallback",
        "extractive",
        "--json",
    )
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    checkpoint = Store(db.engine).latest_compaction(1)
    assert out["status"] == "compacted" and checkpoint is not None
    assert checkpoint.summarizer == out["summarizer"]
    assert checkpoint.summary_tokens == out["summary_tokens"] < out["tokens_before"]
    if checkpoint.summarizer == "openai":
        assert checkpoint.summarizer_model == llm.model
        assert "fallback_from" not in checkpoint.details
        assert checkpoint.details["quality"]["fabrications"] == []
        assert out["summarizer_requests"] >= 1 and out["fell_back"] is None
    else:
        assert checkpoint.summarizer == "extractive"
        failure = checkpoint.details["fallback_from"]
        assert failure["summarizer"].startswith(f"openai (model {llm.model} at ")
        assert failure["reason"].startswith("openai")
        assert out["fell_back"] == failure["reason"]
        assert checkpoint.summary.startswith("## ")


def test_what_the_model_invents_is_caught_as_fabrications(llm):
    """Asked to summarize two sentences about parser.py, SmolLM2 writes the format's
    placeholders as content ("The user's overall aim", "The user's latest request, quoted"),
    numbers none of them held and goals no one stated. The check catches what it copied or
    invented, and every item it reports is truly absent from the history (one request, its
    answer capped at 160 tokens)."""
    messages = [
        Message(1, 1, "user", PARSER_SESSION[0]["content"]),
        Message(2, 1, "assistant", PARSER_SESSION[3]["content"]),
    ]
    summarizer = OpenAISummarizer(
        llm.model, llm.base_url, timeout=900, max_retries=0, max_summary_tokens=160
    )
    text = summarizer.summarize(SummaryRequest(None, messages, {}, max_tokens=160)).text
    found = fabrications(text, messages)
    assert found, text
    history = normalise(" ".join(m.content or "" for m in messages))
    for item in found:
        assert item.kind in ("line", "figure", "instructions", "path", "identifier"), item
        assert normalise(item.text) not in history, item
