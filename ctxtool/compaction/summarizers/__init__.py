"""Summarizers: turn (previous summary + messages to summarize) into a new summary.

``openai`` calls any OpenAI-compatible endpoint through the official client; ``extractive`` is
deterministic and needs no network: the embedded default, and the fallback when no endpoint is
configured. :func:`make_summarizer` picks one from :class:`SummarizerSettings`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from ...core.errors import CtxtoolError, InvalidSettings
from .base import (
    DEFAULT_MAX_SUMMARY_TOKENS,
    DEFAULT_RETRIES,
    DEFAULT_TIMEOUT_S,
    MAX_REQUEST_TIMEOUT_S,
    Summarizer,
    SummarizerError,
    Summary,
    SummaryRequest,
    render_conversation,
)
from .extractive import ExtractiveSummarizer
from .openai import REQUEST_STYLES, OpenAISummarizer, request_parameters, request_style
from .prompt import build_prompt

DEFAULT_SUMMARY_MODEL = "gpt-4o-mini"
KINDS = ("auto", "openai", "extractive")
FALLBACKS = ("none", "extractive")


@dataclass(frozen=True, kw_only=True)
class SummarizerSettings:
    """Which summarizer, where, and its limits."""

    kind: str = "auto"
    model: str | None = None  # default: $CTXTOOL_SUMMARY_MODEL, else gpt-4o-mini
    base_url: str | None = None  # default: $OPENAI_BASE_URL
    api_key: str | None = None  # default: $OPENAI_API_KEY
    timeout: float = DEFAULT_TIMEOUT_S
    retries: int = DEFAULT_RETRIES
    max_summary_tokens: int = DEFAULT_MAX_SUMMARY_TOKENS
    input_tokens: int | None = None  # default: the summary model's window less the frame
    request_style: str = "auto"  # auto | chat | reasoning
    instructions: str | None = None  # the operator's focus, added to every LLM prompt


def endpoint_configured(base_url: str | None = None, api_key: str | None = None) -> bool:
    return bool(
        base_url or api_key or os.environ.get("OPENAI_BASE_URL") or os.environ.get("OPENAI_API_KEY")
    )


def make_summarizer(settings: SummarizerSettings = SummarizerSettings()) -> Summarizer:
    """``auto``: openai when an endpoint is configured (base URL, OPENAI_BASE_URL or
    OPENAI_API_KEY), else extractive. ``openai`` with neither is refused at once: the client
    would spend its retries on api.openai.com before saying "Connection error"."""
    kind = settings.kind
    if kind == "auto":
        kind = (
            "openai" if endpoint_configured(settings.base_url, settings.api_key) else "extractive"
        )
    if kind == "extractive":
        return ExtractiveSummarizer()
    if kind != "openai":
        raise CtxtoolError(f"unknown summarizer {kind!r}: use auto, openai or extractive")
    if not endpoint_configured(settings.base_url, settings.api_key):
        raise CtxtoolError(
            "--summarizer openai needs an endpoint or a key: set OPENAI_API_KEY "
            "(api.openai.com), or --base-url / OPENAI_BASE_URL for a compatible "
            "server; --summarizer extractive needs neither"
        )
    if not 0 < settings.timeout <= MAX_REQUEST_TIMEOUT_S:  # nan fails this too
        raise InvalidSettings(
            f"LLM timeout {settings.timeout!r}: give a number of seconds above 0 and at most a day"
        )
    if settings.request_style not in REQUEST_STYLES:
        raise CtxtoolError(
            f"unknown request style {settings.request_style!r}: use " + ", ".join(REQUEST_STYLES)
        )
    model = settings.model or os.environ.get("CTXTOOL_SUMMARY_MODEL") or DEFAULT_SUMMARY_MODEL
    return OpenAISummarizer(
        model,
        settings.base_url,
        settings.api_key,
        timeout=settings.timeout,
        max_retries=settings.retries,
        max_summary_tokens=settings.max_summary_tokens,
        input_tokens=settings.input_tokens,
        style=settings.request_style,
        instructions=settings.instructions,
    )


def make_fallback(kind: str, summarizer: Summarizer) -> Summarizer | None:
    """The summarizer whose summary is written when ``summarizer``'s fails or is refused
    (``--fallback``): extractive, or None (also when ``summarizer`` is extractive already)."""
    if kind not in FALLBACKS:
        raise CtxtoolError(f"unknown fallback {kind!r}: use " + " or ".join(FALLBACKS))
    if kind == "none" or summarizer.name == "extractive":
        return None
    return ExtractiveSummarizer()


__all__ = [
    "DEFAULT_MAX_SUMMARY_TOKENS",
    "DEFAULT_RETRIES",
    "DEFAULT_TIMEOUT_S",
    "KINDS",
    "MAX_REQUEST_TIMEOUT_S",
    "FALLBACKS",
    "ExtractiveSummarizer",
    "OpenAISummarizer",
    "Summarizer",
    "SummarizerError",
    "SummarizerSettings",
    "Summary",
    "SummaryRequest",
    "build_prompt",
    "endpoint_configured",
    "make_fallback",
    "make_summarizer",
    "render_conversation",
    "request_parameters",
    "request_style",
]
