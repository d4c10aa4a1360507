"""The ``openai`` summarizer: any OpenAI-compatible chat-completions endpoint through the
official client (timeouts, retries with backoff on 429/5xx, a cap on summary tokens).

Request parameters follow the model family: OpenAI's reasoning models (o1/o3/o4, GPT-5) reject
``max_tokens`` and any ``temperature`` but the default, and spend completion tokens on
reasoning, so they get ``max_completion_tokens`` with headroom; chat models and compatible
servers (vLLM, Ollama, llama.cpp) get ``max_tokens`` and ``temperature=0``.

The model's window is learned, not assumed: ``--summary-input-tokens`` when given, else what a
compatible server says of itself (vLLM's ``max_model_len`` in /v1/models, llama.cpp's ``n_ctx``
in /props), else what its context-length error states; the model table only for OpenAI's own
API. A server's tokenizer is not o200k: requests within a known window keep a margin,
corrected from the ``usage.prompt_tokens`` each answer reports. A server with a few slots (llama.cpp) gets no
more requests at once than it has slots: the others wait here, where no timeout runs.
"""

from __future__ import annotations

import http.client
import inspect
import json
import os
import re
import threading
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from types import SimpleNamespace
from typing import Any

import orjson

from ...core.plan import context_window_for
from ...core.tokens import token_lengths
from ...db import mask_url
from ...redaction import SUMMARY_PLACEHOLDER, mask_secrets
from .base import (
    DEFAULT_MAX_SUMMARY_TOKENS,
    DEFAULT_RETRIES,
    DEFAULT_TIMEOUT_S,
    ContextWindowExceeded,
    SummarizerError,
    Summary,
    SummaryRequest,
    report,
)
from .prompt import SYSTEM_PROMPT, build_prompt

REASONING_HEADROOM_TOKENS = 8192
# A request's tokens past its two messages' text: the chat template's role markers. The frame
# around the conversation (system prompt, format, files lines) is the fold's to reserve
# (fold.frame_tokens counts the very prompt sent), so input_tokens leaves only these.
TEMPLATE_TOKENS = 32
REQUEST_STYLES = ("auto", "chat", "reasoning")
# What the openai client retries besides 5xx and connection errors (its _should_retry).
_RETRIED_STATUSES = (408, 409, 429)
_REASONING = re.compile(r"^(o\d+(-|$)|gpt-5(?!-chat))")
# A compatible server's tokenizer against o200k, until an answer's usage says: SmolLM2's
# counts code and prose at up to a fifth more tokens than o200k does.
TOKENIZER_MARGIN = 1.25
USAGE_SLACK = 1.05  # above the largest ratio the answers reported
PROBE_TIMEOUT_S = 5.0
MIN_ANSWER_TOKENS = 256
MIN_INPUT_OPTION = 2048  # the least --summary-input-tokens takes
# A stated window this small gets the brief prompt: the full format's rules would take a
# third of it.
BRIEF_PROMPT_WINDOW = 4096
# The window a server states in its context-length error: OpenAI and vLLM ("This model's
# maximum context length is 8192 tokens"), llama-cpp-python (the same words), llama.cpp's
# server ("exceeds the available context size (8192 tokens)").
_WINDOW_IN_ERROR = (
    re.compile(r"maximum context length is (\d+)"),
    re.compile(r"available context size \((\d+) tokens?\)"),
    re.compile(r"context window of (\d+)"),
)
_CONTEXT_ERROR = re.compile(
    r"context[_ ]length[_ ]exceeded|maximum context length|exceed_context_size|context size",
    re.I,
)


def request_style(model: str, style: str = "auto") -> str:
    """``reasoning`` for OpenAI's reasoning families, else ``chat``; an explicit style wins."""
    if style != "auto":
        return style
    name = model.rsplit("/", 1)[-1].lower()
    return "reasoning" if _REASONING.match(name) else "chat"


def request_parameters(model: str, max_tokens: int, style: str = "auto") -> dict:
    """The completion-size and sampling parameters this model family accepts."""
    if request_style(model, style) == "reasoning":
        return {"max_completion_tokens": max_tokens + REASONING_HEADROOM_TOKENS}
    return {"max_tokens": max_tokens, "temperature": 0}


def _asked_tokens(model: str, max_tokens: int, style: str = "auto") -> int:
    """The completion tokens a request with the cap ``max_tokens`` asks for (a reasoning
    model's headroom included)."""
    sent = request_parameters(model, max_tokens, style)
    return sent.get("max_completion_tokens") or sent["max_tokens"]


def default_input_tokens(model: str, max_tokens: int, style: str = "auto") -> int:
    """What one request's prompt may take, its frame included: the model's window less the
    answer and the chat template's markers."""
    asked = _asked_tokens(model, max_tokens, style)
    return max(2048, context_window_for(model) - asked - TEMPLATE_TOKENS)


class OpenAISummarizer:
    """Any OpenAI-compatible chat-completions endpoint, through the official ``openai`` client."""

    name = "openai"
    revises = True

    def __init__(
        self,
        model: str,
        base_url: str | None = None,
        api_key: str | None = None,
        *,
        timeout: float = DEFAULT_TIMEOUT_S,
        max_retries: int = DEFAULT_RETRIES,
        max_summary_tokens: int = DEFAULT_MAX_SUMMARY_TOKENS,
        input_tokens: int | None = None,
        style: str = "auto",
        instructions: str | None = None,
        slots: int | None = None,
    ):
        self.model = model
        self.max_summary_tokens = max_summary_tokens
        self.style = style
        self.instructions = instructions
        self.requested_input_tokens = input_tokens  # --summary-input-tokens or the config
        self.base_url = base_url or os.environ.get("OPENAI_BASE_URL")
        self.timeout, self.max_retries = timeout, max_retries
        self._api_key = api_key or os.environ.get("OPENAI_API_KEY") or "not-needed"
        self._client: Any = None
        self._client_lock = threading.Lock()
        # The window: None until the server stated it (its own figure, or its error's).
        self.window: int | None = None
        self.window_source: str | None = None
        self._probed = False
        self._clips = False  # the server cuts an answer at its window, saying nothing else
        self._ratio = TOKENIZER_MARGIN if self.base_url else 1.0
        self._largest_ratio = 0.0
        self._announced = False
        # Requests at once: the server's slots (llama.cpp), else as many as the workers.
        self.slots = slots
        self._slots: threading.BoundedSemaphore | None = None
        self._queued = 0
        self._lock = threading.Lock()
        # What the server answered so far: requests, its usage, the seconds they took.
        self.totals = {"requests": 0, "prompt_tokens": 0, "completion_tokens": 0, "seconds": 0.0}

    # -- the window ----------------------------------------------------------------------------

    @property
    def input_tokens(self) -> int:
        """Prompt tokens (o200k) one request may carry, the prompt's frame (system prompt,
        format, files lines) included: the operator's figure, else the window less the answer
        and the chat template's markers, over the tokenizer margin; never more than a window
        the server stated allows. The fold reserves the frame it sends out of this."""
        derived = None
        if self.window is not None:
            room = self.window - self.answer_cap() - TEMPLATE_TOKENS
            derived = max(MIN_ANSWER_TOKENS * 2, int(room / self._ratio))
        if self.requested_input_tokens:
            return min(self.requested_input_tokens, derived or self.requested_input_tokens)
        if derived is not None:
            return derived
        return default_input_tokens(self.model, self.max_summary_tokens, self.style)

    def answer_cap(self) -> int:
        """The most an answer may take: --max-summary-tokens, and at most a quarter of a
        window the server stated (an 8k model given 4k of answer has 3k left to read)."""
        if self.window is None:
            return self.max_summary_tokens
        return max(MIN_ANSWER_TOKENS, min(self.max_summary_tokens, self.window // 4))

    def learn_window(self) -> None:
        """Ask a compatible server its window and slots, once (a few seconds at most; a
        server that does not say leaves the model table's figure, and its context-length
        error teaches the window later). Not OpenAI's API, whose models the table knows. A
        stated window also bounds an operator's --summary-input-tokens that would not fit it."""
        with self._lock:
            if self._probed:
                return
            self._probed = True
        if not self.base_url:
            return
        found = _probe(self.base_url, self._api_key, self.model)
        if found.slots and self.slots is None:
            self.slots = found.slots
        self._clips = found.clips
        if found.window:
            self._learn(found.window, found.source)

    def _learn(self, window: int, source: str) -> None:
        with self._lock:
            if self.window is not None and self.window <= window:
                return
            self.window, self.window_source = window, source

    def window_details(self) -> dict | None:
        """What a checkpoint's details record of the window its requests were sized to."""
        if self.window is None:
            return None
        return {
            "tokens": self.window,
            "source": self.window_source,
            "input_tokens": self.input_tokens,
            "answer_tokens": self.answer_cap(),
            "tokenizer_ratio": round(self._ratio, 3),
        }

    def window_note(self) -> str | None:
        """The learned window, said once a run (the first session that met it)."""
        with self._lock:
            if self.window is None or self._announced:
                return None
            self._announced = True
        return (
            f"the summary model's window is {self.window} tokens ({self.window_source}); "
            f"requests carry at most {self.input_tokens} tokens of prompt "
            f"(--summary-input-tokens sets it)"
        )

    def _observe(self, prompt_o200k: int, response: Any = None, counted: Any = None) -> None:
        """Correct the tokenizer margin from what the server counted for this prompt (its
        answer's usage, or its context-length error's figure)."""
        if response is not None:
            counted = getattr(getattr(response, "usage", None), "prompt_tokens", None)
        if not self.base_url or not isinstance(counted, int) or prompt_o200k < 200:
            return
        with self._lock:
            self._largest_ratio = max(self._largest_ratio, counted / prompt_o200k)
            self._ratio = max(1.0, self._largest_ratio * USAGE_SLACK)

    # -- requests ------------------------------------------------------------------------------

    @property
    def client(self) -> Any:
        """The openai client, made at the first request (once, whatever the workers): a run
        that asks nothing (a dry run, a batch with nothing over threshold) does not import the
        package, most of what a process's start-up costs. It retries
        408/409/429/5xx and connection errors with exponential backoff, after the server's
        Retry-After when it gives one."""
        with self._client_lock:
            if self._client is None:
                import openai

                self._client = openai.OpenAI(
                    api_key=self._api_key,
                    base_url=self.base_url,
                    timeout=self.timeout,
                    max_retries=self.max_retries,
                )
            return self._client

    def seconds_per_request(self) -> float:
        return self.timeout * (self.max_retries + 1) + 8.0 * self.max_retries  # + backoff

    def summarize(self, request: SummaryRequest) -> Summary:
        """One summary. An answer cut at its cap is asked for once more, shorter, in the brief
        format; cut again, it is refused, naming the setting that set the cap."""
        self.learn_window()
        if self.instructions and not request.instructions:
            request = replace(request, instructions=self.instructions)
        max_tokens, why = self._cap(request)
        response, max_tokens = self._ask(self._prompt(request), max_tokens, request.encoding)
        text, finish = self._answer(response)
        notes: tuple[str, ...] = ()
        requests = 1
        if finish == "length":
            if self._learn_from_cut(response, max_tokens):
                # Cut by the window, not the cap: the shorter answer is asked within it.
                max_tokens, why = self._cap(request)
                max_tokens = min(max_tokens, _completion_tokens(response) or max_tokens)
            # The brief format, the ask first: a small model that ran on past its cap with
            # the full one (SmolLM2 repeats itself) stops within it given these.
            shorter = max(64, max_tokens * 2 // 3)
            report(f"asking {self.model} for a shorter summary (the first was cut)")
            again = (
                f"An earlier answer ran past {max_tokens} tokens and was cut off: be brief.\n\n"
                + build_prompt(replace(request, max_tokens=shorter), brief=True)
            )
            response, _ = self._ask(again, max_tokens, request.encoding)
            text, finish = self._answer(response)
            requests = 2
            if finish == "length":
                raise SummarizerError(
                    f"summary was cut at max_tokens={max_tokens} twice, the second time "
                    f"asked for at most {shorter} tokens ({self._where()}); the cap is {why}"
                )
            notes = (f"the first answer was cut at {max_tokens} tokens; a shorter one was asked",)
        # Never a secret in what is written, whatever the model copied (a previous summary).
        text, unicode_notes = _valid_unicode(mask_secrets(text.strip()))
        learned = self.window_note()
        details = self.window_details()
        # The model the server says answered, when it says it as a name.
        answered = getattr(response, "model", None)
        return Summary(
            text,
            self.name,
            answered if isinstance(answered, str) and answered.strip() else self.model,
            requests=requests,
            notes=notes + unicode_notes + ((learned,) if learned else ()),
            details={"summary_window": details} if details else None,
        )

    @property
    def brief_prompt(self) -> bool:
        """Whether requests carry the brief format: for a model whose window is small, stated
        so, or served by llama-cpp-python, which states none and defaults to 2,048 tokens."""
        if self.window is None:
            return self._clips
        return self.window <= BRIEF_PROMPT_WINDOW

    def _prompt(self, request: SummaryRequest) -> str:
        return build_prompt(request, brief=self.brief_prompt)

    def _learn_from_cut(self, response: Any, max_tokens: int) -> bool:
        """Whether an answer cut short of its cap taught the window: llama-cpp-python states no
        window and clips the answer to what its window leaves, so the prompt and the answer
        it counted make its window."""
        prompt = getattr(getattr(response, "usage", None), "prompt_tokens", None)
        answer = _completion_tokens(response)
        asked = _asked_tokens(self.model, max_tokens, self.style)
        if not self._clips or not isinstance(prompt, int) or not _count(prompt):
            return False
        if not answer or answer >= asked:
            return False
        before = self.window
        self._learn(prompt + answer, "the server's answer cut short of its cap at its window")
        return self.window != before

    def _cap(self, request: SummaryRequest) -> tuple[int, str]:
        """The answer's cap, and what set it (the setting a cut answer's message names)."""
        cap = self.answer_cap()
        if request.max_tokens <= cap:
            return request.max_tokens, request.max_tokens_source
        if self.window is not None and cap < self.max_summary_tokens:
            return cap, (
                f"a quarter of the summary model's window of {self.window} tokens "
                "(a model with a larger window, or a server started with a larger one)"
            )
        return cap, "--max-summary-tokens: raise it"

    def _ask(self, prompt: str, max_tokens: int, encoding: str) -> tuple[Any, int]:
        """The response, and the cap it was asked with: within a window the server stated,
        the answer gets what the prompt leaves (never less than a small summary), and a prompt
        that cannot fit is not sent."""
        # The prompt's o200k count sizes it within a window the server stated and corrects the
        # margin; before a window is known nothing reads either, so it is counted only then
        # (and on the context-length error that states the window: _create).
        counted = None
        if self.window is not None:
            counted = _counted(prompt, encoding)
            prompt_tokens = int(counted * self._ratio) + 16  # the chat template's markers
            left = self.window - prompt_tokens
            if left < min(max_tokens, MIN_ANSWER_TOKENS):
                advice = (
                    f"set --summary-input-tokens below {self.input_tokens}"
                    if self.input_tokens > MIN_INPUT_OPTION
                    else "the window cannot hold the prompt's instructions and a summary: use "
                    "a model or a server with a larger window, or --fallback extractive"
                )
                raise ContextWindowExceeded(
                    f"a request of about {prompt_tokens} tokens leaves no room for the answer "
                    f"in the summary model's window of {self.window} tokens ({self._where()}); "
                    + advice,
                    self.window,
                )
            max_tokens = min(max_tokens, left)
        with self._slot():
            started = time.perf_counter()
            response = self._create(prompt, max_tokens, encoding, counted)
            seconds = time.perf_counter() - started
        if counted is not None:
            self._observe(counted, response)
        usage = getattr(response, "usage", None)
        with self._lock:
            self.totals["requests"] += 1
            self.totals["seconds"] += seconds
            for key in ("prompt_tokens", "completion_tokens"):
                value = getattr(usage, key, None)
                self.totals[key] += value if isinstance(value, int) else 0
        return response, max_tokens

    def _answer(self, response: Any) -> tuple[str, str | None]:
        choices = response.choices
        message = (
            getattr(choices[0], "message", None) if isinstance(choices, list) and choices else None
        )
        if not message:
            raise SummarizerError(f"summarizer response has no message ({self._where()})")
        text = getattr(message, "content", None)
        finish = getattr(choices[0], "finish_reason", None)
        if finish != "length" and (not isinstance(text, str) or not text.strip()):
            raise SummarizerError(f"summarizer returned an empty summary ({self._where()})")
        return text or "", finish

    @property
    def queued(self) -> int:
        """Requests waiting for one of the server's slots now."""
        return self._queued

    @contextmanager
    def _slot(self) -> Iterator[None]:
        """One of the server's slots: a request past them waits here, its timeout not yet
        running, and the progress line says how many wait."""
        with self._lock:
            if self._slots is None and self.slots:
                self._slots = threading.BoundedSemaphore(self.slots)
            slots = self._slots
        if slots is None:
            yield
            return
        if not slots.acquire(blocking=False):
            with self._lock:
                self._queued += 1
                queued = self._queued
            report(f"waiting for the server ({queued} queued)")
            slots.acquire()
            with self._lock:
                self._queued -= 1
            report(f"summarizing (waiting for {self.model})")
        try:
            yield
        finally:
            slots.release()

    def _create(self, prompt: str, max_tokens: int, encoding: str, counted: int | None = None):
        client = self.client
        import openai  # imported by the client above: its exceptions

        body = {
            "model": self.model,
            "messages": [
                {"role": "system", "content": SYSTEM_PROMPT},
                {"role": "user", "content": prompt},
            ],
            **request_parameters(self.model, max_tokens, self.style),
        }
        try:
            response = _chat_completion(client, body)
        except openai.APITimeoutError:
            sized = (
                f"; its requests were sized to the model's window of {self.window} tokens "
                f"({self.window_source})"
                if self.window
                else ""
            )
            raise SummarizerError(
                f"summarizer timed out after {self.timeout:g} s ({self._where()}){sized}; a "
                "slow model needs a larger --timeout (per request), or --fallback extractive"
            ) from None
        except openai.APIStatusError as exc:
            status, n = exc.status_code, self.max_retries
            message = str(exc.message)
            window = _window_in_error(status, message, exc.body)
            if window is not False:
                if counted is None:
                    counted = _counted(prompt, encoding)
                self._observe(counted, counted=_prompt_in_error(message, exc.body))
                if window:
                    self._learn(window, "stated by the server's context-length error")
                what = f"{window} tokens" if window else "a window it did not state"
                raise ContextWindowExceeded(
                    f"the request did not fit the summary model's window of {what} "
                    f"({self._where()}); set --summary-input-tokens "
                    f"{'to at most ' + str(self.input_tokens) if window else 'lower'}",
                    window or None,
                ) from None
            # Only what the client retries was asked again: 401 or 400 is the first answer.
            retried = n and (status in _RETRIED_STATUSES or status >= 500)
            after = f" after {n} {'retry' if n == 1 else 'retries'}" if retried else ""
            raise SummarizerError(
                f"summarizer answered HTTP {status}{after} ({self._where()}): {self._shown(message)}"
            ) from None
        except openai.APIConnectionError as exc:
            raise SummarizerError(
                f"cannot reach the summarizer ({self._where()}): {self._shown(str(exc), 0)}"
            ) from None
        except _ErrorAnswer as exc:
            raise SummarizerError(
                f"summarizer answered an error ({self._where()}): {self._shown(str(exc))}"
            ) from None
        except _UnusableAnswer as exc:
            raise SummarizerError(
                f"unusable summarizer response ({self._where()}): {exc}"
            ) from None
        except RecursionError:
            raise SummarizerError(
                f"unusable summarizer response ({self._where()}): its JSON is nested too "
                "deeply to read"
            ) from None
        except (openai.APIError, ValueError, TypeError) as exc:
            raise SummarizerError(
                f"unusable summarizer response ({self._where()}): "
                f"{exc.__class__.__name__}: {self._shown(str(exc))}"
            ) from None
        if not hasattr(response, "choices"):
            raise SummarizerError(
                f"unusable summarizer response ({self._where()}): not a chat "
                f"completion: {self._shown(str(response), 80)}"
            )
        return response

    def describe(self) -> str:
        """Which summarizer runs where, for reports (credentials in the URL masked), and the
        window its requests are sized to when the server stated it."""
        window = f", window {self.window} tokens" if self.window else ""
        return f"openai ({self._where()}{window})"

    def _shown(self, text: str, limit: int = 200) -> str:
        """A server's words for an error line, which is printed and stored in the checkpoint
        (--fallback's reason): credentials masked, the configured key too whatever its shape
        (a proxy may echo the key it refused), then clipped (0: whole)."""
        text = mask_secrets(text)
        if len(self._api_key) >= 8 and self._api_key != "not-needed":
            text = text.replace(self._api_key, SUMMARY_PLACEHOLDER)
        return _clip(text, limit) if limit else text

    def _where(self) -> str:
        return f"model {self.model} at {mask_url(self.base_url) if self.base_url else 'api.openai.com'}"


def _chat_completion(client: Any, body: dict) -> Any:
    """POST the body to /chat/completions through the client (its retries, timeouts and
    errors): what ``chat.completions.create`` sends for these plain parameters, without its
    type-driven transform of them. Where the client's ``post`` takes raw content, the body is
    serialized once and the answer read as plain JSON (:func:`_read_completion`), not built
    into the client's models; else it is posted as it is and read as a ``ChatCompletion``."""
    from openai.types.chat import ChatCompletion

    if not _takes_content(client):
        return client.post("/chat/completions", body=body, cast_to=ChatCompletion)
    answer = client.post("/chat/completions", content=orjson.dumps(body), cast_to=object)
    if isinstance(answer, str):
        # A JSON answer under another content type, which the client read as text: read
        # as a ChatCompletion would have been.
        try:
            answer = json.loads(answer)
        except ValueError:
            return answer
    return _read_completion(answer, ChatCompletion)


def _takes_content(client: Any) -> bool:
    """Whether the client's ``post`` takes a raw body (``content``: openai 2.x)."""
    found = _TAKES_CONTENT.get(type(client))
    if found is None:
        found = "content" in inspect.signature(client.post).parameters
        _TAKES_CONTENT[type(client)] = found
    return found


_TAKES_CONTENT: dict[type, bool] = {}


class _UnusableAnswer(Exception):
    """An answer whose shape is not a chat completion's where the summarizer reads it."""


class _ErrorAnswer(Exception):
    """An answer that carries an error object instead of choices (under HTTP 200)."""


def _read_completion(answer: Any, model: Any) -> Any:
    """A chat completion's JSON as the attributes the summarizer reads (``choices[i].message
    .content``, ``.finish_reason``, ``usage.prompt_tokens``, ``.completion_tokens``,
    ``model``), each the value the client's ``model.construct`` gives it: the JSON value as
    it is, None where it is missing. An answer without ``choices`` is built as the client
    builds it (``model``), for the message that says it is no chat completion; one carrying
    an error object instead raises :class:`_ErrorAnswer` with the server's words, and
    choices of another shape than a list of objects whose message is an object raise
    :class:`_UnusableAnswer`."""
    if isinstance(answer, dict) and "choices" not in answer and "error" in answer:
        raise _ErrorAnswer(_error_words(answer["error"]))
    if not isinstance(answer, dict) or "choices" not in answer:
        return model.construct(**answer) if isinstance(answer, dict) else answer
    choices = answer["choices"]
    _check_choices(choices)
    if isinstance(choices, list):
        choices = [_read_choice(c) if isinstance(c, dict) else c for c in choices]
    usage = answer.get("usage")
    if isinstance(usage, dict):
        usage = SimpleNamespace(
            prompt_tokens=usage.get("prompt_tokens"),
            completion_tokens=usage.get("completion_tokens"),
        )
    return SimpleNamespace(choices=choices, usage=usage, model=answer.get("model"))


def _check_choices(choices: Any) -> None:
    """Raise :class:`_UnusableAnswer` unless the choices are a list (or null) whose first
    item, the one read, is an object with an object (or no) message."""
    if choices is None:
        return
    if not isinstance(choices, list):
        raise _UnusableAnswer(f"its choices are {_json_kind(choices)}, not a list")
    if not choices:
        return
    if not isinstance(choices[0], dict):
        raise _UnusableAnswer(f"its first choice is {_json_kind(choices[0])}, not an object")
    message = choices[0].get("message")
    if message is not None and not isinstance(message, dict):
        raise _UnusableAnswer(f"its first choice's message is {_json_kind(message)}, not an object")


def _json_kind(value: Any) -> str:
    """What a JSON value is, in words."""
    if isinstance(value, bool):
        return "true or false"
    kinds = {dict: "an object", list: "a list", str: "a string", int: "a number", float: "a number"}
    return kinds.get(type(value), "null" if value is None else type(value).__name__)


def _error_words(error: Any) -> str:
    """The words of an answer's error object (its ``message``), else the object as JSON."""
    if isinstance(error, dict) and isinstance(error.get("message"), str):
        return error["message"]
    return error if isinstance(error, str) else json.dumps(error)


def _read_choice(choice: dict) -> SimpleNamespace:
    message = choice.get("message")
    if isinstance(message, dict):
        message = SimpleNamespace(content=message.get("content"))
    return SimpleNamespace(message=message, finish_reason=choice.get("finish_reason"))


def _counted(prompt: str, encoding: str) -> int:
    """The request's prompt in ``encoding``'s tokens: the system prompt and the user's."""
    return sum(token_lengths([SYSTEM_PROMPT, prompt], encoding))


class Probed:
    """What a server said of itself: its window (and where), its slots, whether it cuts an
    answer at its window without saying so."""

    def __init__(self, window: int | None = None, source: str = "", slots: int | None = None):
        self.window, self.source, self.slots = window, source, slots
        self.clips = False


def _probe(base_url: str, api_key: str, model: str) -> Probed:
    """The window and slots a compatible server states: vLLM's ``max_model_len`` (and
    others' ``context_length``) in /v1/models, llama.cpp's ``n_ctx`` and ``total_slots`` in
    /props. Nothing when it does not answer within a few seconds: the window is then learned
    from its first context-length error."""
    root = base_url.rstrip("/")
    found = Probed()
    models = _get_json(root + "/models", api_key)
    listed = models.get("data") if isinstance(models, dict) else None
    listed = listed if isinstance(listed, list) else []
    for item in listed:
        if not isinstance(item, dict) or (item.get("id") != model and len(listed) > 1):
            continue
        for key in ("max_model_len", "context_length", "context_window", "n_ctx"):
            value = item.get(key)
            if _count(value):
                found.window, found.source = value, f"the server's /v1/models {key}"
        if item.get("owned_by") == "me" and item.get("permissions") == []:
            # llama-cpp-python's server (its /v1/models says no more): one request at a time,
            # the others held behind a lock while their timeouts run; an answer past its
            # window is cut there, not refused.
            found.slots, found.clips = 1, True
    props = _get_json(re.sub(r"/v1$", "", root) + "/props", api_key)
    if isinstance(props, dict):
        settings = props.get("default_generation_settings") or {}
        n_ctx = settings.get("n_ctx") if isinstance(settings, dict) else None
        n_ctx = n_ctx or props.get("n_ctx")
        if _count(n_ctx) and found.window is None:
            found.window, found.source = n_ctx, "the server's /props n_ctx"
        slots = props.get("total_slots")
        if _count(slots):
            found.slots = slots
    return found


def _completion_tokens(response: Any) -> int | None:
    """The answer's tokens as the server counted them (its usage), if it said."""
    value = getattr(getattr(response, "usage", None), "completion_tokens", None)
    return value if _count(value) else None


def _count(value: Any) -> bool:
    """Whether a server's JSON field is a count (JSON true is no window of 1 token)."""
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def _get_json(url: str, api_key: str) -> Any:
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {api_key}"})
    try:
        with urllib.request.urlopen(request, timeout=PROBE_TIMEOUT_S) as answer:  # noqa: S310
            return json.loads(answer.read(1_000_000))
    except (OSError, ValueError, http.client.HTTPException):  # a port that speaks no HTTP
        return None


_PROMPT_IN_ERROR = (
    re.compile(r"\((\d+) in the messages"),  # vLLM, llama-cpp-python
    re.compile(r"\((\d+) in your prompt"),
    re.compile(r"request \((\d+) tokens\) exceeds"),  # llama.cpp
)


def _prompt_in_error(message: str, body: Any) -> int | None:
    """The prompt tokens a context-length error says the server counted."""
    return _figure_in_error(_error_of(body), "n_prompt_tokens", message, _PROMPT_IN_ERROR)


def _window_in_error(status: int, message: str, body: Any) -> int | None | bool:
    """The window a context-length error states (None: such an error that states none);
    False when the error is of another kind."""
    error = _error_of(body)
    code = str(error.get("code") or "") + " " + str(error.get("type") or "")
    if status not in (400, 413, 422) or not (
        _CONTEXT_ERROR.search(code) or _CONTEXT_ERROR.search(message)
    ):
        return False
    return _figure_in_error(error, "n_ctx", message, _WINDOW_IN_ERROR)


def _error_of(body: Any) -> dict:
    """The error object of an error answer (OpenAI's and llama.cpp's nest it, vLLM's not)."""
    error = body.get("error", body) if isinstance(body, dict) else {}
    return error if isinstance(error, dict) else {}


def _figure_in_error(
    error: dict, key: str, message: str, patterns: tuple[re.Pattern, ...]
) -> int | None:
    """A figure an error answer gives as a field (llama.cpp's), else in its words."""
    value = error.get(key)
    if _count(value):
        return value
    for pattern in patterns:
        found = pattern.search(message)
        if found:
            return int(found.group(1))
    return None


def _valid_unicode(text: str) -> tuple[str, tuple[str, ...]]:
    """The answer with lone UTF-16 surrogates (JSON may carry "\\ud800"; no database can store
    one) replaced by U+FFFD, and a note when there were any."""
    try:
        text.encode("utf-8")
        return text, ()
    except UnicodeEncodeError:
        clean = text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
        return clean, ("lone UTF-16 surrogates in the answer were replaced by U+FFFD",)


def _clip(text: str, limit: int = 200) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit] + "…"
