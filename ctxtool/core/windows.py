"""Context windows and when a session compacts: each model's window, and the settings that set
its compaction threshold. Apart from the planner (``core.plan``, which re-exports them) so
that a command that only reads a store (``sessions list``) can size windows without loading
the rules of a cut."""

from __future__ import annotations

import functools
from dataclasses import dataclass

from .errors import InvalidSettings

DEFAULT_RESERVE_TOKENS = 16_384
DEFAULT_KEEP_RECENT_TOKENS = 20_000
DEFAULT_CONTEXT_WINDOW = 128_000
# A summary that carries earlier ones may grow to this many times its budget (--max-summary-growth).
DEFAULT_MAX_SUMMARY_GROWTH = 1.5

# Context windows by model-name prefix (longest prefix wins); --context-window overrides.
CONTEXT_WINDOWS: dict[str, int] = {
    "gpt-4o": 128_000,
    "gpt-4.1": 1_047_576,
    "gpt-4.5": 128_000,
    "gpt-4-turbo": 128_000,
    "gpt-4-32k": 32_768,
    "gpt-4": 8_192,
    "gpt-3.5-turbo": 16_385,
    "gpt-5": 400_000,
    "o1": 200_000,
    "o3": 200_000,
    "o4": 200_000,
    "chatgpt-4o": 128_000,
    "gpt-oss": 131_072,
    "claude": 200_000,
    "gemini": 1_048_576,
    "llama": 128_000,
    "mistral": 128_000,
    "deepseek": 128_000,
    "qwen": 131_072,
}


def context_window_for(model: str | None, override: int | None = None) -> int:
    """The model's context window: the override, else the longest matching prefix, else 128k."""
    if override:
        return override
    return _model_window(model)


@functools.lru_cache(maxsize=4096)
def _model_window(model: str | None) -> int:
    """The context window of the longest known prefix of ``model``'s name (its last path
    part), else the default. Cached: `compact --all` asks it for every session, twice, and a
    store holds few distinct model names."""
    name = (model or "").rsplit("/", 1)[-1].lower()
    best = max((p for p in CONTEXT_WINDOWS if name.startswith(p)), key=len, default=None)
    return CONTEXT_WINDOWS[best] if best else DEFAULT_CONTEXT_WINDOW


@dataclass(frozen=True, kw_only=True)
class CompactionSettings:
    """When a session compacts and how much stays verbatim (keyword-only: each is a rule)."""

    context_window: int | None = None  # None: from the session's model
    reserve_tokens: int | None = (
        None  # None: DEFAULT_RESERVE_TOKENS, at most a quarter of the window
    )
    keep_recent_tokens: int = DEFAULT_KEEP_RECENT_TOKENS
    # How far the summary's budget may grow for the summaries it carries (core.prepare).
    max_summary_growth: float = DEFAULT_MAX_SUMMARY_GROWTH

    def __post_init__(self) -> None:
        """Settings no session can run with are refused where they are made, for the CLI and a
        library caller alike: a reserve that swallows the window given with it leaves no
        threshold at all."""
        if self.context_window is not None and self.context_window < 1:
            raise InvalidSettings(f"--context-window {self.context_window} is not a window")
        for name, value in (
            ("--reserve-tokens", self.reserve_tokens),
            ("--keep-recent-tokens", self.keep_recent_tokens),
        ):
            if value is not None and value < 0:
                raise InvalidSettings(f"{name} {value} is negative")
        if not 1 <= self.max_summary_growth <= 4:
            raise InvalidSettings(
                f"--max-summary-growth {self.max_summary_growth} is not between 1 and 4"
            )
        if (
            self.context_window is not None
            and self.reserve_tokens is not None
            and self.reserve_tokens >= self.context_window
        ):
            raise InvalidSettings(
                f"--reserve-tokens {self.reserve_tokens} leaves nothing of a "
                f"--context-window of {self.context_window}"
            )

    def reserve(self, model: str | None) -> int:
        """Room kept free for the answer. The default never takes more than a quarter of the
        window: 16k of gpt-4's 8k would leave no threshold at all."""
        if self.reserve_tokens is not None:
            return self.reserve_tokens
        return min(DEFAULT_RESERVE_TOKENS, context_window_for(model, self.context_window) // 4)

    def threshold(self, model: str | None) -> int:
        """Compact when the current context exceeds this many tokens. A reserve that takes the
        whole window leaves none: that is the settings' fault, said as such (exit code 2), not
        every session's "over a threshold of -72000 tokens". A window given with the reserve
        was checked on construction; here the window is the model's."""
        window = context_window_for(model, self.context_window)
        reserve = self.reserve(model)
        if reserve >= window:
            raise InvalidSettings(
                f"--reserve-tokens {reserve} leaves nothing of the {window}-token "
                f"window of {model or 'a session without a model'}: give a smaller "
                "--reserve-tokens, or a --context-window"
            )
        return window - reserve


def should_compact(context_tokens: int, model: str | None, settings: CompactionSettings) -> bool:
    return context_tokens > settings.threshold(model)
