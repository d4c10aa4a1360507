"""The ``openai`` summarizer: any OpenAI-compatible chat-completions endpoint through the
official client (timeouts, retries with backoff on 429/5xx, a cap on summary tokens).

Request parameters follow the model family: OpenAI's reasoning models (o1/o3/o4, GPT-5) reject
``max_tokens`` and any ``temperature`` but the default, and spend completion tokens on
reasoning, so they get ``max_completion_tokens`` with headroom; chat models and compatible
servers (vLLM, Ollama, llama.cpp) get ``max_tokens`` and ``temperature=0``.
"""

from __future__ import annotations

import os
import re
import threading
from dataclasses import replace
from typing import Any

from ...db import mask_url
from ...redaction import mask_secrets
from ..plan import context_window_for
from .base import (
    DEFAULT_MAX_SUMMARY_TOKENS,
    DEFAULT_RETRIES,
    DEFAULT_TIMEOUT_S,
    SummarizerError,
    Summary,
    SummaryRequest,
)
from .prompt import SYSTEM_PROMPT, build_prompt

REASONING_HEADROOM_TOKENS = 8192
PROMPT_OVERHEAD_TOKENS = 1024  # system prompt, format, previous-summary frame, files line
REQUEST_STYLES = ("auto", "chat", "reasoning")
# What the openai client retries besides 5xx and connection errors (its _should_retry).
_RETRIED_STATUSES = (408, 409, 429)
_REASONING = re.compile(r"^(o\d+(-|$)|gpt-5(?!-chat))")


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


def default_input_tokens(model: str, max_tokens: int, style: str = "auto") -> int:
    """What one request may carry: the model's window less the answer and the prompt frame."""
    answer = request_parameters(model, max_tokens, style)
    answer_tokens = answer.get("max_completion_tokens") or answer["max_tokens"]
    return max(2048, context_window_for(model) - answer_tokens - PROMPT_OVERHEAD_TOKENS)


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
    ):
        self.model = model
        self.max_summary_tokens = max_summary_tokens
        self.style = style
        self.instructions = instructions
        self.input_tokens = input_tokens or default_input_tokens(model, max_summary_tokens, style)
        self.base_url = base_url or os.environ.get("OPENAI_BASE_URL")
        self.timeout, self.max_retries = timeout, max_retries
        self._api_key = api_key or os.environ.get("OPENAI_API_KEY") or "not-needed"
        self._client: Any = None
        self._client_lock = threading.Lock()

    @property
    def client(self) -> Any:
        """The openai client, made at the first request (once, whatever the workers): a run
        that asks nothing (a dry run, a batch with nothing over threshold) does not import the
        package, most of a process's start-up (0.9 s of CPU of 2.2). It retries
        408/409/429/5xx and connection errors with exponential backoff."""
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
        max_tokens = min(request.max_tokens, self.max_summary_tokens)
        if self.instructions and not request.instructions:
            request = replace(request, instructions=self.instructions)
        response = self._create(build_prompt(request), max_tokens)
        choices = response.choices
        if not choices or not getattr(choices[0], "message", None):
            raise SummarizerError(f"summarizer response has no message ({self._where()})")
        text = choices[0].message.content
        if not isinstance(text, str) or not text.strip():
            raise SummarizerError(f"summarizer returned an empty summary ({self._where()})")
        if getattr(choices[0], "finish_reason", None) == "length":
            raise SummarizerError(
                f"summary was cut at max_tokens={max_tokens} "
                f"({self._where()}); raise --max-summary-tokens"
            )
        # Never a secret in what is written, whatever the model copied (a previous summary).
        text, notes = _valid_unicode(mask_secrets(text.strip()))
        return Summary(text, self.name, getattr(response, "model", None) or self.model, notes=notes)

    def _create(self, prompt: str, max_tokens: int):
        client = self.client
        import openai  # imported by the client above: its exceptions

        try:
            response = client.chat.completions.create(
                model=self.model,
                messages=[
                    {"role": "system", "content": SYSTEM_PROMPT},
                    {"role": "user", "content": prompt},
                ],
                **request_parameters(self.model, max_tokens, self.style),
            )
        except openai.APITimeoutError:
            raise SummarizerError(f"summarizer timed out ({self._where()})") from None
        except openai.APIStatusError as exc:
            status, n = exc.status_code, self.max_retries
            # Only what the client retries was asked again: 401 or 400 is the first answer.
            retried = n and (status in _RETRIED_STATUSES or status >= 500)
            after = f" after {n} {'retry' if n == 1 else 'retries'}" if retried else ""
            raise SummarizerError(
                f"summarizer answered HTTP {status}{after} "
                f"({self._where()}): {_clip(str(exc.message))}"
            ) from None
        except openai.APIConnectionError as exc:
            raise SummarizerError(f"cannot reach the summarizer ({self._where()}): {exc}") from None
        except (openai.APIError, ValueError, TypeError) as exc:
            raise SummarizerError(
                f"unusable summarizer response ({self._where()}): "
                f"{exc.__class__.__name__}: {_clip(str(exc))}"
            ) from None
        if not hasattr(response, "choices"):
            raise SummarizerError(
                f"unusable summarizer response ({self._where()}): not a chat "
                f"completion: {_clip(str(response), 80)}"
            )
        return response

    def describe(self) -> str:
        """Which summarizer runs where, for reports (credentials in the URL masked)."""
        return f"openai ({self._where()})"

    def _where(self) -> str:
        return f"model {self.model} at {mask_url(self.base_url) if self.base_url else 'api.openai.com'}"


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
