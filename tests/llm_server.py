"""A local OpenAI-compatible chat-completions server for tests and benchmarks.

The real ``openai`` client talks to it over HTTP on 127.0.0.1. Its behaviour is scripted:
fixed delay, a queue of failure statuses before success, garbage or empty answers, hangs.
It rejects what the real servers reject for a model name: OpenAI's reasoning models (o1, o3,
o4, gpt-5 but gpt-5-chat) refuse ``max_tokens`` and a non-default ``temperature`` with HTTP 400
and spend completion tokens on reasoning (a tight ``max_completion_tokens`` ends in
``finish_reason=length``); open models served by vLLM/Ollama-style servers refuse
``max_completion_tokens``. ``prompt_tokens`` records each request's prompt size (o200k).
"""

from __future__ import annotations

import json
import re
import socket
import threading
import time
from collections import deque
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

_REASONING = re.compile(r"^(o\d+(-|$)|gpt-5(?!-chat))")
_OPENAI = re.compile(r"^(gpt-|o\d|chatgpt-|text-)")
QUOTE_CHARS = 120  # of a user message, quoted in the default summary
REASONING_TOKENS = 1500  # what a reasoning model spends before it answers


def rejection(body: dict) -> str | None:
    """The 400 message the real API gives for this request's parameters, or None."""
    model = str(body.get("model") or "").rsplit("/", 1)[-1].lower()
    if _REASONING.match(model):
        if "max_tokens" in body:
            return (
                "Unsupported parameter: 'max_tokens' is not supported with this model. "
                "Use 'max_completion_tokens' instead."
            )
        if "temperature" in body and body["temperature"] != 1:
            return (
                f"Unsupported value: 'temperature' does not support {body['temperature']} "
                "with this model. Only the default (1) value is supported."
            )
    elif (
        not _OPENAI.match(model)
        and model not in ("test-model", "m", "bench")
        and "max_completion_tokens" in body
    ):
        return "max_completion_tokens: Extra inputs are not permitted"
    return None


def faithful_summary(body: dict) -> str:
    """What a competent model answers by default: the goal, the latest request and the current
    work quoted from the prompt's transcript (so it passes the quality gate); a revision puts
    the listed missing items back into its draft."""
    prompt = str(body["messages"][-1]["content"])
    draft = re.search(r"<draft-summary>\n?(.*?)\n?</draft-summary>", prompt, re.S)
    if draft:
        missing = []
        for tag in ("unanswered-questions", "dropped-items"):
            listed = re.search(rf"<{tag}>\n?(.*?)\n?</{tag}>", prompt, re.S)
            missing += (
                [m.removeprefix("- ") for m in listed.group(1).splitlines()] if listed else []
            )
        return draft.group(1) + "\n\n## Put back\n" + "\n".join(f"- {m}" for m in missing)
    users = [u[:QUOTE_CHARS] for u in re.findall(r"^\[User\]: (.+)$", prompt, re.M)]
    said = re.findall(r"^\[Assistant\]: (.+)$", prompt, re.M)
    calls = re.findall(r"^\[Assistant tool call (.+)$", prompt, re.M)
    previous = re.search(r"<previous-summary>\n?(.*?)\n?</previous-summary>", prompt, re.S)
    work = "\n".join(filter(None, (said[-1] if said else "", calls[-1] if calls else "")))
    if not users and previous:  # a later chunk of a fold with no user turn: the summary goes on
        return previous.group(1) + (f"\n\n## Current work\n{work}" if work else "")
    if not users:
        return "## Goal\nFix the bug.\n\n## Progress\n### Done\n- [x] investigated"
    text = (
        previous.group(1) + "\n\n" if previous else ""
    ) + f"## Goal\n{users[0]}\n\n## Latest request\n{users[-1]}\n\n## Current work\n{work}"
    # Within the answer's budget, as a model condenses: the oldest lines after the goal go.
    cap = 3 * int(body.get("max_tokens") or body.get("max_completion_tokens") or 4096) // 2
    lines = text.splitlines()
    while len("\n".join(lines)) > cap and len(lines) > 8:
        del lines[2]
    return "\n".join(lines)


class FakeLLM:
    """Start with ``with FakeLLM() as llm:``; point clients at ``llm.base_url``.

    ``window``: the model's context window, counted as the real servers count (o200k times
    ``tokenizer_ratio``, plus ``max_tokens``); past it the answer is the 400 ``error_style``
    gives: ``llama-cpp-python`` and ``vllm`` ("maximum context length is N"), ``llama.cpp``
    ("exceeds the available context size (N tokens)", with ``n_ctx``), ``openai`` (the
    ``context_length_exceeded`` code). ``models`` and ``props`` are what GET /v1/models and
    GET /props answer besides the model's id (``max_model_len``; ``n_ctx``, ``total_slots``).
    ``most_at_once`` records the most requests it had in hand at once."""

    def __init__(self, delay: float = 0.0):
        self.delay = delay
        self.failures: deque[int] = deque()  # statuses to answer before succeeding
        # ok | garbage | no_choices | empty | long | hang | length | length_once
        self.mode = "ok"
        self.retry_after: dict[str, str] = {"retry-after-ms": "5"}  # with each failure
        self.window: int | None = None
        self.tokenizer_ratio = 1.0
        self.error_style = "llama-cpp-python"
        # Past its window, cut the answer to what the prompt leaves, finish "length", as
        # llama-cpp-python does, instead of refusing the request (a prompt past it is refused).
        self.clips = False
        # The usage's prompt_tokens as the server reports them (None: what it counted); a
        # server may report 0 (a prompt served from its cache).
        self.reported_prompt_tokens: object = None
        self.models: dict = {}
        self.props: dict | None = None
        self.in_hand = 0
        self.most_at_once = 0
        self.slots: int | None = None  # answer this many at once, queue the rest (llama.cpp)
        self._slots: threading.Semaphore | None = None
        self.summary_text: object = faithful_summary  # a text, or a function of the request
        # Answer every request with this body under HTTP 200 (JSON, or a str sent as it is):
        # a server's odd answers.
        self.answer_body: object = None
        self.requests: list[dict] = []
        self.prompt_tokens: list[int] = []
        self.lock = threading.Lock()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def __enter__(self) -> FakeLLM:
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()
        return False

    def _handler(self):
        llm = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):  # keep test output clean
                pass

            def setup(self):
                super().setup()
                # Headers and body go out in two writes: without TCP_NODELAY, Nagle's algorithm
                # and the client's delayed ACK add ~40 ms to every answer.
                self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

            def do_GET(self):
                if self.path.rstrip("/").endswith("/models"):
                    item = {"id": "smollm2", "object": "model", "owned_by": "me", **llm.models}
                    return self._send(200, {"object": "list", "data": [item]})
                if self.path.rstrip("/") == "/props" and llm.props is not None:
                    return self._send(200, llm.props)
                return self._send(404, {"error": {"message": "not found"}})

            def do_POST(self):
                with llm.lock:
                    llm.in_hand += 1
                    llm.most_at_once = max(llm.most_at_once, llm.in_hand)
                    if llm.slots and llm._slots is None:
                        llm._slots = threading.Semaphore(llm.slots)
                    slots = llm._slots
                self._in_hand = True
                try:
                    if slots is None:
                        self._post()
                    else:
                        with slots:
                            self._post()
                finally:
                    self._answered()

            def _answered(self):
                """The request leaves the hand as its answer goes out: a client that has read
                the answer may send its next request before this thread returns."""
                if getattr(self, "_in_hand", False):
                    self._in_hand = False
                    with llm.lock:
                        llm.in_hand -= 1

            def _post(self):
                length = int(self.headers.get("content-length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                prompt = sum(
                    _tokens(str(m.get("content") or "")) for m in body.get("messages") or []
                )
                with llm.lock:
                    llm.requests.append(body)
                    llm.prompt_tokens.append(prompt)
                    status = llm.failures.popleft() if llm.failures else 200
                    mode = llm.mode
                    if mode == "length_once":
                        llm.mode = "ok"
                counted = int(prompt * llm.tokenizer_ratio) + 12
                asked = int(body.get("max_tokens") or body.get("max_completion_tokens") or 0)
                clipped = None
                if llm.clips and llm.window is not None and counted < llm.window < counted + asked:
                    clipped = llm.window - counted
                elif llm.window is not None and counted + asked > llm.window:
                    return self._send(
                        400, window_error(llm.error_style, llm.window, counted, asked)
                    )
                refused = rejection(body)
                if refused:
                    return self._send(
                        400,
                        {
                            "error": {
                                "message": refused,
                                "type": "invalid_request_error",
                                "param": None,
                                "code": "unsupported_parameter",
                            }
                        },
                    )
                if llm.delay:
                    time.sleep(llm.delay)
                if status != 200:
                    return self._send(
                        status,
                        {"error": {"message": f"scripted {status}", "type": "server_error"}},
                        llm.retry_after,
                    )
                if mode == "hang":
                    time.sleep(30)
                if llm.answer_body is not None:
                    raw = llm.answer_body
                    data = raw if isinstance(raw, str) else json.dumps(raw)
                    return self._raw(200, data.encode(), "application/json")
                if mode == "garbage":
                    return self._raw(200, b"<html>definitely not json", "text/html")
                if mode == "no_choices":
                    return self._send(
                        200,
                        {
                            "id": "x",
                            "object": "chat.completion",
                            "created": 0,
                            "model": body.get("model"),
                            "choices": [],
                        },
                    )
                text = {"empty": "", "long": "word " * 50_000}.get(mode, llm.summary_text)
                if callable(text):
                    text = text(body)
                finish = "length" if mode in ("length", "length_once") else "stop"
                if clipped is not None and _tokens(text) >= clipped:
                    text, finish = " ".join(text.split()[: clipped // 2]), "length"
                cap = body.get("max_completion_tokens")
                model = str(body.get("model") or "").rsplit("/", 1)[-1].lower()
                if (
                    cap is not None
                    and _REASONING.match(model)
                    and cap < REASONING_TOKENS + _tokens(text)
                ):
                    text, finish = "", "length"  # the budget went on reasoning
                self._send(
                    200,
                    {
                        "id": "chatcmpl-test",
                        "object": "chat.completion",
                        "created": int(time.time()),
                        "model": body.get("model"),
                        "choices": [
                            {
                                "index": 0,
                                "finish_reason": finish,
                                "message": {"role": "assistant", "content": text},
                            }
                        ],
                        "usage": {
                            "prompt_tokens": counted
                            if llm.reported_prompt_tokens is None
                            else llm.reported_prompt_tokens,
                            "completion_tokens": clipped
                            if finish == "length" and clipped
                            else _tokens(text),
                            "total_tokens": counted + _tokens(text),
                        },
                    },
                )

            def _send(self, status, payload, headers=None):
                self._raw(status, json.dumps(payload).encode(), "application/json", headers)

            def _raw(self, status, data, ctype, headers=None):
                self._answered()
                self.send_response(status)
                self.send_header("content-type", ctype)
                self.send_header("content-length", str(len(data)))
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                try:
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass

        return Handler


def window_error(style: str, window: int, prompt: int, asked: int) -> dict:
    """The 400 body a real server gives for a request past its window."""
    if style == "llama.cpp":
        return {
            "error": {
                "code": 400,
                "message": f"request ({prompt} tokens) exceeds the available context size "
                f"({window} tokens), try increasing it",
                "type": "exceed_context_size_error",
                "n_prompt_tokens": prompt,
                "n_ctx": window,
            }
        }
    if style == "vllm":
        message = (
            f"This model's maximum context length is {window} tokens. However, you requested "
            f"{prompt + asked} tokens ({prompt} in the messages, {asked} in the completion). "
            "Please reduce the length of the messages or completion."
        )
        return {"object": "error", "message": message, "type": "BadRequestError", "code": 400}
    code = "context_length_exceeded"
    message = (
        f"This model's maximum context length is {window} tokens. However, you requested "
        f"{prompt + asked} tokens ({prompt} in the messages, {asked} in the completion). "
        "Please reduce the length of the messages or completion."
    )
    return {
        "error": {
            "message": message,
            "type": "invalid_request_error",
            "param": "messages",
            "code": code,
        }
    }


def _tokens(text: str) -> int:
    from ctxtool.core.tokens import count_text

    return count_text(text, "o200k_base")


def main() -> None:
    """Run standalone (for benchmarks): prints its base URL, serves until killed."""
    import argparse
    import sys

    parser = argparse.ArgumentParser(description="local OpenAI-compatible test server")
    parser.add_argument("--delay", type=float, default=0.0, help="seconds before each answer")
    args = parser.parse_args()
    with FakeLLM(delay=args.delay) as llm:
        print(llm.base_url, flush=True)
        try:
            sys.stdin.read()  # until the parent closes our stdin
        except KeyboardInterrupt:
            pass


if __name__ == "__main__":
    main()
