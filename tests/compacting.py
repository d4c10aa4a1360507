"""`ctxtool compact` with the LLM summarizer, run the way the tests run it: through the real
entry point, the real ``openai`` client against tests/llm_server.py."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .builders import LIMITS

if TYPE_CHECKING:
    from .conftest import Database
    from .llm_server import FakeLLM


def openai_args(llm: FakeLLM) -> list[str]:
    """The options that point ``compact`` at the local LLM server (model ``m``)."""
    return ["--summarizer", "openai", "--model", "m", "--base-url", llm.base_url]


def compact_with_llm(cli, db: Database, llm: FakeLLM, *args: str, env: dict | None = None):
    """``ctxtool --db URL compact ARGS`` with the openai summarizer on ``llm`` (model ``m``, no
    retries, the small windows of LIMITS). ARGS come last: an option given there (``--retries
    3``, ``--model o3-mini``, another window) wins over these defaults, as click takes the last."""
    return cli(
        "--db",
        db.url,
        "compact",
        *openai_args(llm),
        "--retries",
        "0",
        *LIMITS,
        *args,
        env=env,
    )


def compact_at(cli, db: Database, base_url: str, model: str, *args: str, env: dict | None = None):
    """``ctxtool --db URL compact`` with the openai summarizer on ``model`` at ``base_url`` (a
    stand-in server speaking as another, or the real one of tests/real_llm.py); ARGS last."""
    return cli(
        "--db",
        db.url,
        "compact",
        "--summarizer",
        "openai",
        "--model",
        model,
        "--base-url",
        base_url,
        *args,
        env=env,
    )
