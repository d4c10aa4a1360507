"""Exact token counts, offline: tiktoken with the vocabularies that ship inside ctxtool.

The chat-format overhead follows OpenAI's published counting recipe (3 tokens per message, 1 per
name, 3 to prime the reply); a tool call adds its function name and arguments. Claude, Gemini and
other non-OpenAI models have no public tokenizer here: their counts use o200k_base and are marked
as estimates.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from importlib import resources
from typing import Any

import tiktoken
from tiktoken.load import load_tiktoken_bpe

from .errors import CtxtoolError

# The vocabularies shipped in ctxtool/vocab, pinned to the sha256 tiktoken itself expects.
SHIPPED_VOCABULARIES = {
    "o200k_base": "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
    "cl100k_base": "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
}

# The split patterns and special tokens of the shipped encodings, as tiktoken_ext.openai_public
# defines them (tests/test_tokens.py checks that these build the identical encoder).
_CL100K_PATTERN = (
    r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+"""
    r"""|\s++$|\s*[\r\n]|\s+(?!\S)|\s"""
)
_O200K_PATTERN = "|".join(
    [
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""\p{N}{1,3}""",
        r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
        r"""\s*[\r\n]+""",
        r"""\s+(?!\S)""",
        r"""\s+""",
    ]
)
_SPECIAL_TOKENS = {
    "cl100k_base": {
        "<|endoftext|>": 100257,
        "<|fim_prefix|>": 100258,
        "<|fim_middle|>": 100259,
        "<|fim_suffix|>": 100260,
        "<|endofprompt|>": 100276,
    },
    "o200k_base": {"<|endoftext|>": 199999, "<|endofprompt|>": 200018},
}
_PATTERNS = {"cl100k_base": _CL100K_PATTERN, "o200k_base": _O200K_PATTERN}

DEFAULT_ENCODING = "o200k_base"

# OpenAI's recipe (cookbook "How to count tokens with tiktoken"), current chat models.
TOKENS_PER_MESSAGE = 3
TOKENS_PER_NAME = 1
REPLY_PRIMING_TOKENS = 3
TOKENS_PER_TOOL_CALL = 3

_cache: dict[str, tiktoken.Encoding] = {}
_lock = threading.Lock()


@dataclass(frozen=True)
class EncodingChoice:
    """Which encoding counts a model's text, and whether that count is only an estimate."""

    name: str
    estimate: bool
    reason: str


def encoding_for_model(model: str | None, override: str | None = None) -> EncodingChoice:
    """Pick the encoding for ``model`` (``override`` wins).

    OpenAI models map through tiktoken's own model table (o200k_base for GPT-4o/4.1/4.5/5 and
    the o-series, cl100k_base for GPT-4 and 3.5). Anything else (Claude, Gemini, Llama, unknown
    or missing) is counted with o200k_base and flagged as an estimate.
    """
    if override:
        return EncodingChoice(override, False, "--encoding")
    if not model:
        return EncodingChoice(DEFAULT_ENCODING, True, "no model recorded")
    bare = model.rsplit("/", 1)[-1].strip().lower()
    try:
        name = tiktoken.encoding_name_for_model(bare)
    except KeyError:
        return EncodingChoice(DEFAULT_ENCODING, True, f"{model} has no public tiktoken encoding")
    return EncodingChoice(name, False, f"tiktoken model table ({model})")


def known_encodings() -> list[str]:
    """The encoding names :func:`get_encoding` can load (shipped, or known to tiktoken)."""
    return sorted(set(tiktoken.list_encoding_names()) | set(SHIPPED_VOCABULARIES))


def unknown_encoding(name: str) -> str | None:
    """What is wrong with ``name`` as an encoding (one line: tiktoken's own message is three,
    about its plugins), or None when :func:`get_encoding` knows it."""
    known = known_encodings()
    return None if name in known else f"unknown encoding {name!r} (known: {', '.join(known)})"


def get_encoding(name: str) -> tiktoken.Encoding:
    """The tiktoken Encoding ``name``; the shipped ones load from the package, verified by sha256.

    Other encodings go through tiktoken's normal download and cache.
    """
    with _lock:
        if name in _cache:
            return _cache[name]
        if name in SHIPPED_VOCABULARIES:
            path = resources.files("ctxtool.vocab").joinpath(f"{name}.tiktoken")
            try:
                ranks = load_tiktoken_bpe(str(path), expected_hash=SHIPPED_VOCABULARIES[name])
            except ValueError as exc:
                raise CtxtoolError(f"shipped vocabulary {path} is corrupt: {exc}") from None
            enc = tiktoken.Encoding(
                name=name,
                pat_str=_PATTERNS[name],
                mergeable_ranks=ranks,
                special_tokens=_SPECIAL_TOKENS[name],
            )
        else:
            try:
                enc = tiktoken.get_encoding(name)
            except ValueError:
                raise CtxtoolError(unknown_encoding(name) or f"unknown encoding {name!r}") from None
            except Exception as exc:  # network, proxy, TLS: tiktoken raises several kinds
                raise CtxtoolError(
                    f"cannot load tiktoken encoding {name!r} ({exc.__class__.__name__}); it is not "
                    f"shipped with ctxtool (only {', '.join(SHIPPED_VOCABULARIES)}) and could not be "
                    "downloaded: put its .tiktoken file in a directory named by "
                    "TIKTOKEN_CACHE_DIR, or use --encoding o200k_base"
                ) from None
        _cache[name] = enc
        return enc


@dataclass
class MessageText:
    """The parts of one stored message that the model reads (what gets counted)."""

    role: str
    content: str | None = None
    name: str | None = None
    tool_calls: Sequence[dict[str, Any]] | None = None


def api_calls(tool_calls: Any) -> list[dict[str, Any]]:
    """A ``tool_calls`` column as the API takes it: ``{id, type: function, function: {name,
    arguments (a JSON string)}}``, ids, names and arguments strings. A runtime writes the column
    itself, so anything can be there (``{"a": 1}``, ``["call_1"]``, ``[null]``, ``42``): entries
    that are not objects are left out (``validate`` reports them). The one reader of the column:
    ``Message.calls()`` and the token counts both go through it."""
    if not isinstance(tool_calls, list):
        return []
    out = []
    for c in tool_calls:
        if not isinstance(c, dict):
            continue
        function = c.get("function")
        fn: dict[str, Any] = function if isinstance(function, dict) else {}
        args = fn.get("arguments")
        if args is None:
            args = ""
        elif not isinstance(args, str):
            args = json.dumps(args, ensure_ascii=False)
        call_id = c.get("id")
        out.append(
            {
                "id": call_id if isinstance(call_id, str) else str(call_id or ""),
                "type": "function",
                "function": {"name": str(fn.get("name") or ""), "arguments": args},
            }
        )
    return out


def _tool_call_parts(tool_calls: Any) -> list[str]:
    """The texts of a message's tool calls that the model reads: each name and its arguments."""
    parts: list[str] = []
    for call in api_calls(tool_calls):
        parts += [call["function"]["name"], call["function"]["arguments"]]
    return parts


def count_messages(
    messages: Sequence[MessageText],
    encoding: str | tiktoken.Encoding,
    num_threads: int | None = None,
) -> list[int]:
    """Token count of each message, chat-format overhead included (reply priming excluded).

    Text is encoded as ordinary text: a special-token string such as ``<|endoftext|>`` in user
    data is counted like any other characters, never an error. The texts of the whole batch are
    measured together by :func:`token_lengths`, which spreads them over threads.
    """
    if not messages:  # nothing to count loads no vocabulary
        return []
    enc = get_encoding(encoding) if isinstance(encoding, str) else encoding
    texts: list[str] = []
    owners: list[int] = []
    counts: list[int] = []
    role_cache: dict[str, int] = {}
    for i, m in enumerate(messages):
        role_tokens = role_cache.get(m.role)
        if role_tokens is None:
            role_tokens = role_cache[m.role] = len(enc.encode_ordinary(m.role))
        overhead = TOKENS_PER_MESSAGE + role_tokens
        if m.content:
            texts.append(m.content)
            owners.append(i)
        if m.name:
            overhead += TOKENS_PER_NAME
            texts.append(m.name)
            owners.append(i)
        parts = _tool_call_parts(m.tool_calls)
        overhead += TOKENS_PER_TOOL_CALL * (len(parts) // 2)
        for part in parts:
            texts.append(part)
            owners.append(i)
        counts.append(overhead)
    for owner, n in zip(owners, token_lengths(texts, enc, num_threads)):
        counts[owner] += n
    return counts


def token_lengths(
    texts: Sequence[str], encoding: str | tiktoken.Encoding, num_threads: int | None = None
) -> list[int]:
    """How many tokens each text encodes to (as ordinary text), without keeping the tokens.

    ``encode_ordinary_batch`` turns every token into a Python int in a list only for ``len()`` to
    read it: 18M ints for 82 MB of text, built while holding the GIL. tiktoken's buffer encoder
    (the one behind ``encode_to_numpy``) hands the tokens back as one array instead: a count
    takes about half the time (scripts/bench_tokens.py, 2 threads). Texts are spread over a
    shared thread pool in chunks; the encoder releases the GIL, so the threads run in parallel.
    """
    enc = get_encoding(encoding) if isinstance(encoding, str) else encoding
    length = _length_of(enc)
    if len(texts) < _BATCH_FROM_TEXTS:
        # A few texts (a summary, a system prompt): handing them to threads costs more than it saves.
        return [length(t) for t in texts]
    threads = num_threads or _default_threads()
    if threads == 1:
        return [length(t) for t in texts]
    step = max(1, min(_CHUNK, -(-len(texts) // threads)))
    chunks = [texts[i : i + step] for i in range(0, len(texts), step)]
    try:
        parts = _pool(threads).map(lambda chunk: [length(t) for t in chunk], chunks)
    except RuntimeError:
        # The interpreter is shutting down (an atexit handler counting): no new work for
        # threads, so count here.
        return [length(t) for t in texts]
    out: list[int] = []
    for part in parts:
        out += part
    return out


# Below this many texts they are encoded one by one in the calling thread.
_BATCH_FROM_TEXTS = 16
# Texts per task handed to a thread: small enough to balance long texts over the threads.
_CHUNK = 32
_NO_SPECIAL: frozenset[str] = frozenset()
_pools: dict[int, ThreadPoolExecutor] = {}
_MAX_THREADS = 32


def _length_of(enc: tiktoken.Encoding) -> Callable[[str], int]:
    """The fastest exact ``len(enc.encode_ordinary(text))`` this tiktoken offers."""
    cached = _lengths.get(enc)  # an Encoding hashes by identity
    if cached is not None:
        return cached

    def plain(text: str) -> int:
        return len(enc.encode_ordinary(text))

    length = plain
    to_buffer = getattr(getattr(enc, "_core_bpe", None), "encode_to_tiktoken_buffer", None)
    if to_buffer is not None:
        # With no special token allowed, tiktoken encodes "<|endoftext|>" and friends as
        # ordinary text, exactly as encode_ordinary does (tests/test_tokens.py checks both
        # agree). The buffer holds 4-byte token ids.
        def buffered(text: str) -> int:
            try:
                return memoryview(to_buffer(text, _NO_SPECIAL)).nbytes // 4
            except UnicodeEncodeError:  # a lone surrogate: encode_ordinary repairs it first
                return plain(text)

        try:  # a private API: a tiktoken that changed it falls back, once, to the public one
            if buffered("hello world") == plain("hello world"):
                length = buffered
        except Exception:  # noqa: BLE001 - any change of signature or result
            pass
    _lengths[enc] = length
    return length


_lengths: dict[tiktoken.Encoding, Callable[[str], int]] = {}


def _default_threads() -> int:
    return min(8, os.cpu_count() or 1)


def _pool(threads: int) -> ThreadPoolExecutor:
    """One long-lived pool per size: starting threads on every batch cost about a millisecond.
    Sizes are capped, so odd ``num_threads`` values cannot pile up idle threads."""
    threads = min(threads, _MAX_THREADS)
    with _lock:
        pool = _pools.get(threads)
        if pool is None:
            pool = _pools[threads] = ThreadPoolExecutor(
                threads, thread_name_prefix="ctxtool-tokens"
            )
        return pool


def _forget_pools_in_child() -> None:
    """A forked child inherits the pools but not their threads: work handed to them would
    wait forever. The child starts its own (and a fresh lock, in case a parent thread held it)."""
    global _lock
    _pools.clear()
    _lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_pools_in_child)


def count_text(text: str, encoding: str = DEFAULT_ENCODING) -> int:
    """Tokens of a bare text (a summary, a system prompt), without message overhead."""
    return token_lengths([text or ""], encoding)[0]
