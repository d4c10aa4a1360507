"""The openai summarizer's plain request (issue #45 item 12): against a server on plain
http:// its first attempt is a plain HTTP request carrying what the client's own first attempt
carries, read here when it is a JSON 200; anything else is handed to the client as that
attempt's answer, so its retries and its errors are what they were, and no request is sent
twice. Against tests/llm_server.py and a server that records what it is sent, through the real
``openai`` client."""

from __future__ import annotations

import http.client
import io
import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from ctxtool.compaction.summarizers.base import SummarizerError
from ctxtool.compaction.summarizers.openai import (
    OpenAISummarizer,
    _chat_completion,
    _closed_by_peer,
    _json_body,
    _read_answer,
    _Replay,
)

from .llm_server import FakeLLM

BODY = {
    "model": "bench",
    "messages": [{"role": "user", "content": "summarize: the tests fail in src/a.py"}],
    "max_tokens": 100,
    "temperature": 0,
}
ANSWER = {
    "id": "c1",
    "object": "chat.completion",
    "model": "served-model",
    "choices": [
        {
            "index": 0,
            "message": {"role": "assistant", "content": "## Goal\nfix"},
            "finish_reason": "stop",
        }
    ],
    "usage": {"prompt_tokens": 12, "completion_tokens": 3, "total_tokens": 15},
}


class Recorder:
    """A server that records each request's headers and body and answers ``ANSWER``."""

    def __init__(self):
        self.seen: list[tuple[dict[str, str], bytes]] = []
        recorder = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_POST(self):
                body = self.rfile.read(int(self.headers["content-length"]))
                recorder.seen.append(({k.lower(): v for k, v in self.headers.items()}, body))
                data = json.dumps(ANSWER).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.base_url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def _read(response) -> tuple:
    choice = response.choices[0]
    usage = response.usage
    return (
        choice.message.content,
        choice.finish_reason,
        usage.prompt_tokens,
        usage.completion_tokens,
        response.model,
    )


def test_the_plain_request_is_the_clients_first_attempt_and_reads_the_same_answer():
    recorder = Recorder()
    try:
        summarizer = OpenAISummarizer("bench", recorder.base_url, "sk-test-key-1234", timeout=5)
        client = summarizer.client
        plain = summarizer._plain
        assert plain is not None  # a server on http://: the plain request is used
        by_plain = _chat_completion(client, BODY, plain)
        by_client = _chat_completion(client, BODY, None)
    finally:
        recorder.close()
    (plain_headers, plain_body), (client_headers, client_body) = recorder.seen
    assert plain_body == client_body
    assert plain_headers == client_headers  # authorization, user agent, retry count 0, ...
    assert plain_headers["authorization"] == "Bearer sk-test-key-1234"
    assert _read(by_plain) == _read(by_client) == ("## Goal\nfix", "stop", 12, 3, "served-model")
    assert plain.replay.sent == 1  # only the request sent through the client on purpose


def test_a_summary_through_the_plain_request_sends_nothing_through_the_client():
    from ctxtool.compaction.summarizers.base import SummaryRequest

    with FakeLLM() as llm:
        summarizer = OpenAISummarizer("bench", llm.base_url, "k", timeout=10, max_retries=2)
        for _ in range(3):
            summary = summarizer.summarize(SummaryRequest(None, _span(), {}, max_tokens=400))
            assert summary.text
        assert len(llm.requests) == 3
    assert summarizer._plain is not None and summarizer._plain.replay.sent == 0


def test_a_failed_first_attempt_is_the_clients_first_retried_as_it_retries_it():
    """A 503 the plain request met is the client's first attempt: it waits the Retry-After,
    sends one retry itself, and the server sees two requests, not three."""
    with FakeLLM() as llm:
        llm.failures.extend([503])
        summarizer = OpenAISummarizer("bench", llm.base_url, "k", timeout=10, max_retries=2)
        client = summarizer.client
        response = _chat_completion(client, BODY, summarizer._plain)
        assert len(llm.requests) == 2
    assert summarizer._plain.replay.sent == 1
    assert response.choices[0].finish_reason == "stop"


@pytest.mark.parametrize("retries", [0, 2])
def test_a_failing_server_gives_the_same_error_and_requests_with_or_without_it(retries):
    errors, counts = [], []
    for plain in (True, False):
        with FakeLLM() as llm:
            llm.failures.extend([500] * 5)
            summarizer = OpenAISummarizer(
                "bench", llm.base_url, "k", timeout=10, max_retries=retries
            )
            summarizer.client  # noqa: B018 - made, with the plain request
            if not plain:
                summarizer._plain = None
            with pytest.raises(SummarizerError) as raised:
                summarizer._create("the prompt", 100, "o200k_base")
            errors.append(str(raised.value).replace(llm.base_url, "URL"))
            counts.append(len(llm.requests))
    assert errors[0] == errors[1]
    assert f"answered HTTP 500{' after 2 retries' if retries else ''}" in errors[0]
    assert counts == [retries + 1, retries + 1]


def test_a_context_length_error_is_sent_once_and_teaches_the_window():
    with FakeLLM() as llm:
        llm.window = 300
        summarizer = OpenAISummarizer("bench", llm.base_url, "k", timeout=10, max_retries=2)
        summarizer.client  # noqa: B018
        with pytest.raises(SummarizerError, match="window of 300 tokens"):
            summarizer._create("word " * 400, 100, "o200k_base")
        assert len(llm.requests) == 1
    assert summarizer.window == 300


def test_a_timeout_is_the_clients_timeout_after_one_request():
    with FakeLLM() as llm:
        llm.mode = "hang"
        summarizer = OpenAISummarizer("bench", llm.base_url, "k", timeout=0.5, max_retries=0)
        summarizer.client  # noqa: B018
        with pytest.raises(SummarizerError, match=r"timed out after 0\.5 s"):
            summarizer._create("the prompt", 100, "o200k_base")
        assert len(llm.requests) == 1


def test_a_refused_connection_is_the_clients_connection_error():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed once the block ends: nothing listens there
    errors = []
    for plain in (True, False):
        summarizer = OpenAISummarizer(
            "bench", f"http://127.0.0.1:{port}/v1", "k", timeout=2, max_retries=1
        )
        summarizer.client  # noqa: B018
        if not plain:
            summarizer._plain = None
        with pytest.raises(SummarizerError) as raised:
            summarizer._create("the prompt", 100, "o200k_base")
        errors.append(str(raised.value))
    assert errors[0] == errors[1]
    assert "cannot reach the summarizer" in errors[0]


def test_the_plain_request_only_where_it_is_the_clients(monkeypatch):
    for name in ("http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY"):
        monkeypatch.delenv(name, raising=False)
    assert _Replay.for_url("http://127.0.0.1:8080/v1") is not None
    assert _Replay.for_url("https://api.openai.com/v1") is None  # TLS: the client's
    assert _Replay.for_url(None) is None  # OpenAI's own API
    assert _Replay.for_url("http://user:pw@127.0.0.1:8080/v1") is None
    assert _Replay.for_url("http://127.0.0.1:8080/v1?api-version=1") is None
    monkeypatch.setenv("http_proxy", "http://proxy.example:3128")
    assert _Replay.for_url("http://127.0.0.1:8080/v1") is None  # a proxy: the client's


def test_which_answers_the_plain_request_reads_itself():
    json_type = [("Content-Type", "application/json; charset=utf-8")]
    assert _json_body(json_type)
    assert _json_body([("content-type", "application/vnd.api+json")])
    assert not _json_body([("content-type", "text/html")])
    assert not _json_body([])  # no content type: the client reads it as text
    assert not _json_body(json_type + [("Content-Encoding", "gzip")])  # the client decodes it


def test_a_kept_alive_connection_the_server_closed_is_not_reused():
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    sock = socket.create_connection(listener.getsockname(), timeout=2)
    accepted, _ = listener.accept()
    try:
        assert not _closed_by_peer(sock)  # idle and open
        accepted.close()  # the server's idle timeout
        assert _closed_by_peer(sock)
    finally:
        sock.close()
        listener.close()


def _answer(raw: bytes):
    return _read_answer(io.BytesIO(raw))


def test_an_answer_is_read_as_http_1_1_frames_it():
    head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
    assert _answer(head + b"Content-Length: 2\r\n\r\n{}extra") == (
        200,
        [("Content-Type", "application/json"), ("Content-Length", "2")],
        b"{}",
        True,
    )
    chunked = (
        head + b'Transfer-Encoding: chunked\r\n\r\n3;x=y\r\n{"a\r\n4\r\n":1}\r\n0\r\nT: 1\r\n\r\n'
    )
    assert _answer(chunked)[2] == b'{"a":1}'
    interim = b"HTTP/1.1 100 Continue\r\n\r\n" + head + b"Content-Length: 0\r\n\r\n"
    assert _answer(interim)[0] == 200
    # Framed by the connection's end: read to it, and the connection is not kept.
    assert _answer(head + b'\r\n{"b": 2}')[2:] == (b'{"b": 2}', False)
    assert _answer(b"HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n")[3] is False
    close = b"HTTP/1.1 503 busy\r\nConnection: close\r\nContent-Length: 1\r\n\r\nx"
    assert _answer(close) == (503, [("Connection", "close"), ("Content-Length", "1")], b"x", False)
    assert _answer(b"HTTP/1.1 204 No Content\r\nContent-Length: 9\r\n\r\n")[2] == b""


@pytest.mark.parametrize(
    "raw",
    [
        b"",  # closed before answering
        b"SSH-2.0-OpenSSH\r\n\r\n",
        b"HTTP/1.1 2x0 OK\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nno colon here\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort",
        b"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
    ],
)
def test_a_malformed_answer_is_a_protocol_error(raw):
    with pytest.raises(http.client.HTTPException):
        _answer(raw)


def _span():
    from ctxtool.core.records import Message

    return [
        Message(id=1, session_id=1, role="user", content="fix the failing test in src/a.py"),
        Message(id=2, session_id=1, role="assistant", content="Fixed src/a.py."),
    ]
