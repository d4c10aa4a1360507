"""The summary model's window learned from the server (issue #43), against the stand-in server
tests/llm_server.py speaking as vLLM, llama.cpp, llama-cpp-python and OpenAI do: from what the
server says of itself, else from its context-length error, with the span folded again inside
it; the tokenizer margin corrected from what the server counted. Through `ctxtool compact`, the
real ``openai`` client over HTTP."""

from __future__ import annotations

import json
import re
import socket
import threading

import pytest

from ctxtool.store import Store

from .builders import LIMITS, add_session, coding_session
from .compacting import compact_at
from .llm_server import FakeLLM, faithful_summary

# A span of about 20k o200k tokens, compacted whatever its threshold (--force).
WIDE = ["--context-window", "60000", "--reserve-tokens", "4000", "--keep-recent-tokens", "1500"]


def compact(cli, db, llm: FakeLLM, *args: str):
    return compact_at(
        cli, db, llm.base_url, "smollm2", "1", "--force", "--retries", "0", *WIDE, *args
    )


def assert_within(llm: FakeLLM, window: int) -> None:
    """Every request the server took fitted its window as it counts (no 400 was needed)."""
    for body, prompt in zip(llm.requests, llm.prompt_tokens):
        assert int(prompt * llm.tokenizer_ratio) + 12 + body["max_tokens"] <= window


def test_the_window_vllm_states_in_its_models_list_bounds_every_request(db, cli):
    """vLLM's /v1/models gives max_model_len: a 20k-token span against an 8k model is folded
    in requests that fit it, with the answer capped to a quarter of it, never a 400; the
    checkpoint records the window and where it came from, the output says it once."""
    add_session(db, 1, coding_session(40), model="gpt-4o")
    with FakeLLM() as llm:
        llm.window, llm.error_style, llm.tokenizer_ratio = 8192, "vllm", 1.2
        llm.models = {"max_model_len": 8192}
        result = compact(cli, db, llm)
        assert result.exit_code == 0, result.output
        assert len(llm.requests) > 2
        assert_within(llm, 8192)
        assert all(body["max_tokens"] <= 2048 for body in llm.requests)
    details = Store(db.engine).latest_compaction(1).details["summary_window"]
    assert details["tokens"] == 8192 and "max_model_len" in details["source"]
    assert result.output.count("the summary model's window is 8192 tokens") == 1
    assert "window 8192 tokens" in result.output  # the summarizer line


def test_the_window_llama_cpp_states_in_props_bounds_every_request(db, cli):
    add_session(db, 1, coding_session(40), model="gpt-4o")
    with FakeLLM() as llm:
        llm.window, llm.error_style = 8192, "llama.cpp"
        llm.props = {"default_generation_settings": {"n_ctx": 8192}, "total_slots": 1}
        result = compact(cli, db, llm)
        assert result.exit_code == 0, result.output
        assert_within(llm, 8192)
    details = Store(db.engine).latest_compaction(1).details["summary_window"]
    assert details["source"] == "the server's /props n_ctx"


@pytest.mark.parametrize("style", ["llama-cpp-python", "llama.cpp", "vllm", "openai"])
def test_the_window_a_context_length_error_states_is_learned_and_the_span_folded(db, cli, style):
    """A server that says nothing of its window: the first request (sized to the model table's
    128k) meets its 400, the window it states is learned, and the span is folded again inside
    it; the run writes the checkpoint and says what it learned once."""
    add_session(db, 1, coding_session(40), model="gpt-4o")
    with FakeLLM() as llm:
        llm.window, llm.error_style = 8192, style
        result = compact(cli, db, llm, "--json")
        assert result.exit_code == 0, result.output
        answered = llm.requests[1:]
        assert len(answered) > 2
    out = json.loads(result.stdout)
    assert out["status"] == "compacted"
    assert any("stated by the server's context-length error" in n for n in out["notes"])
    assert any("folded again" in n for n in out["notes"])
    details = Store(db.engine).latest_compaction(1).details["summary_window"]
    assert details["tokens"] == 8192 and details["source"].startswith("stated by")


def test_a_server_tokenizer_counting_more_than_the_margin_is_corrected(db, cli):
    """The server counts 1.6 tokens for each o200k token, past the 1.25 margin: its
    context-length error says how many it counted, the margin follows, and the fold fits."""
    add_session(db, 1, coding_session(40), model="gpt-4o")
    with FakeLLM() as llm:
        llm.window, llm.tokenizer_ratio = 8192, 1.6
        llm.models = {"max_model_len": 8192}
        result = compact(cli, db, llm)
        assert result.exit_code == 0, result.output
    details = Store(db.engine).latest_compaction(1).details["summary_window"]
    assert details["tokenizer_ratio"] >= 1.6


def test_a_window_too_small_for_any_request_is_one_line_saying_what_to_do(db, cli):
    """A model whose window cannot hold the prompt's frame and a summary: one line naming
    a larger window or the fallback, never the server's 400 nor a traceback; nothing written."""
    add_session(db, 1, coding_session(40), model="gpt-4o")
    with FakeLLM() as llm:
        llm.window = 1200
        llm.models = {"max_model_len": 1200}
        result = compact(cli, db, llm)
    assert result.exit_code == 1
    assert "window of 1200 tokens" in result.output and "larger window" in result.output
    assert "HTTP 400" not in result.output and "Traceback" not in result.output
    assert db.scalar("SELECT COUNT(*) FROM agent_compaction") == 0


def test_an_operator_bound_past_the_stated_window_is_held_to_it(db, cli):
    """--summary-input-tokens 16000 against an 8k server: the server's figure wins."""
    add_session(db, 1, coding_session(40), model="gpt-4o")
    with FakeLLM() as llm:
        llm.window = 8192
        llm.models = {"max_model_len": 8192}
        result = compact(cli, db, llm, "--summary-input-tokens", "16000")
        assert result.exit_code == 0, result.output
        assert_within(llm, 8192)


def _raw_server(payload: bytes) -> str:
    """A TCP server answering every connection with ``payload`` (not HTTP: a database's
    handshake, a proxy's garbage), as a wrong --base-url port gives."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(8)

    def run():
        while True:
            c, _ = s.accept()
            try:
                c.recv(65536)
                c.sendall(payload)
            finally:
                c.close()

    threading.Thread(target=run, daemon=True).start()
    return f"http://127.0.0.1:{s.getsockname()[1]}/v1"


def test_a_base_url_that_is_not_http_is_an_error_line_not_a_traceback(db, cli):
    """The window probe reads /v1/models first: a port answering with no HTTP status line
    (http.client.BadStatusLine) is a server that states no window, then the request's own
    one-line error."""
    add_session(db, 1, coding_session(12), model="gpt-4o")
    url = _raw_server(b"\x00\x01binary handshake\r\n\r\n")
    result = compact_at(cli, db, url, "m", "1", "--retries", "0", *LIMITS)
    assert "internal error" not in result.output, result.output
    assert "Traceback" not in result.output


def test_a_server_stating_a_boolean_window_is_not_a_window_of_one_token():
    """JSON true is an int to Python: "max_model_len": true is no window, not 1 token."""
    from ctxtool.compaction.summarizers.openai import _probe

    body = b'{"data":[{"id":"m","max_model_len":true}]}'
    url = _raw_server(
        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: "
        + str(len(body)).encode()
        + b"\r\n\r\n"
        + body
    )
    assert _probe(url, "sk-x", "m").window is None


def test_the_brief_format_asks_for_the_full_one_s_sections():
    """The brief format is the full one's sections with shorter placeholders: the same
    headings in the same order, so a small model's summary is read back section by section
    as a larger one's is, and a section added to one format but not the other fails here."""
    from ctxtool.compaction.summarizers.prompt import BRIEF_FORMAT, SUMMARY_FORMAT

    def headings(text: str) -> list[str]:
        return re.findall(r"^## (.+)$", text, re.M)

    assert headings(SUMMARY_FORMAT) and headings(BRIEF_FORMAT) == headings(SUMMARY_FORMAT)
    assert len(BRIEF_FORMAT) < len(SUMMARY_FORMAT) // 2


def test_a_small_stated_window_gets_the_brief_prompt(db, cli):
    """A 2,048-token model: the full format's rules would take a third of its window, so
    every request carries the brief format (the same sections, one line of rules) and fits;
    an 8k model gets the full one."""
    add_session(db, 1, coding_session(4), model="gpt-4o")
    with FakeLLM() as llm:
        llm.window = 2048
        llm.props = {"default_generation_settings": {"n_ctx": 2048}, "total_slots": 1}
        result = compact(cli, db, llm, "--max-summary-tokens", "256")
        assert result.exit_code == 0, result.output
        prompts = [body["messages"][1]["content"] for body in llm.requests]
        assert prompts and all("Rules: be brief." in p for p in prompts)
        assert not any("State rules" in p for p in prompts)
        assert_within(llm, 2048)
    add_session(db, 2, coding_session(4), model="gpt-4o")
    with FakeLLM() as llm:
        llm.props = {"default_generation_settings": {"n_ctx": 8192}, "total_slots": 1}
        result = compact_at(
            cli, db, llm.base_url, "smollm2", "2", "--force", "--retries", "0", *WIDE
        )
        assert result.exit_code == 0, result.output
        assert "State rules" in llm.requests[0]["messages"][1]["content"]


def test_an_answer_llama_cpp_python_cut_at_its_window_teaches_the_window(db, cli):
    """llama-cpp-python states no window and cuts an answer at what its window leaves: the
    cut answer's prompt and answer tokens are its window, and the shorter answer is asked
    within it, in the brief format, not at the first cap (which it would cut again)."""
    add_session(db, 1, coding_session(4), model="gpt-4o")
    with FakeLLM() as llm:
        llm.window, llm.clips, llm.models = 2048, True, {"permissions": []}
        first = "word " * 3000  # a model that runs on past the window
        llm.summary_text = lambda body: first if len(llm.requests) == 1 else faithful_summary(body)
        result = compact(cli, db, llm, "--max-summary-tokens", "2000")
        assert result.exit_code == 0, result.output
        assert len(llm.requests) == 2 and llm.requests[0]["max_tokens"] == 2000
        assert all("Rules: be brief." in b["messages"][1]["content"] for b in llm.requests)
        # The first request was cut; the shorter answer was asked within the learned window.
        assert llm.prompt_tokens[0] + 12 + 2000 > 2048
        assert llm.prompt_tokens[1] + 12 + llm.requests[1]["max_tokens"] <= 2048
    checkpoint = Store(db.engine).latest_compaction(1)
    assert checkpoint.summarizer == "openai"
    window = checkpoint.details["summary_window"]
    assert window["tokens"] == 2048 and "cut short of its cap" in window["source"]


def _conversation_tokens(body: dict) -> int:
    """The tokens (o200k) of a request's conversation, the frame around it left out."""
    from ctxtool.core.tokens import count_text

    prompt = body["messages"][1]["content"]
    inner = prompt.split("<conversation>\n", 1)[1].split("\n</conversation>", 1)[0]
    return count_text(inner, "o200k_base")


# The most conversation a chunk could carry when the frame was reserved twice: the 512-token
# floor at 4k (the budget came out negative), 1,331 tokens at 8k. A 2k window stays at the
# floor: its ~1,200 prompt tokens hold the brief frame (~430) and a previous summary (~400).
TWICE_RESERVED = {4096: 512, 8192: 1331}


@pytest.mark.parametrize("window", sorted(TWICE_RESERVED))
def test_a_small_window_s_chunks_carry_conversation_not_a_frame_reserved_twice(db, cli, window):
    """The fold reserves the prompt's frame out of the summarizer's input bound; the bound
    kept one of its own (1,024 tokens) besides, the fold counted the full format for a window
    that is sent the brief one, and the answer budget was not held to the bound the server's
    figure made: 4k windows' chunks fell to the 512-token floor. Now each chunk but the
    last carries more than the old bound allowed, and every request still fits the window."""
    add_session(db, 1, coding_session(40), model="gpt-4o")
    with FakeLLM() as llm:
        llm.window, llm.error_style, llm.tokenizer_ratio = window, "llama.cpp", 1.1
        llm.props = {"default_generation_settings": {"n_ctx": window}, "total_slots": 1}
        result = compact(cli, db, llm)
        assert result.exit_code == 0, result.output
        assert_within(llm, window)
        chunks = [_conversation_tokens(body) for body in llm.requests]
    assert len(chunks) > 2
    assert min(chunks[:-1]) > TWICE_RESERVED[window], chunks


def test_a_cut_answer_whose_usage_counts_no_prompt_teaches_no_window(db, cli):
    """llama-cpp-python's cut answer teaches its window as prompt plus answer tokens; a usage
    whose prompt_tokens is 0 (an int, no count: a prompt served from a cache) taught a window
    of the answer alone, too small for any request. Now the window stays unknown and the
    shorter answer is written."""
    add_session(db, 1, coding_session(4), model="gpt-4o")
    with FakeLLM() as llm:
        llm.window, llm.clips, llm.models = 2048, True, {"permissions": []}
        llm.reported_prompt_tokens = 0
        first = "word " * 3000  # a model that runs on past the window
        llm.summary_text = lambda body: first if len(llm.requests) == 1 else faithful_summary(body)
        result = compact(cli, db, llm, "--max-summary-tokens", "2000")
        assert result.exit_code == 0, result.output
        assert len(llm.requests) == 2
    checkpoint = Store(db.engine).latest_compaction(1)
    assert checkpoint.summarizer == "openai"
    assert "summary_window" not in checkpoint.details
