"""What a secret is, in one place. Redaction on the way out (``context export --redact``,
``sessions archive --redact``): secrets, e-mail addresses and home directory paths replaced by
typed placeholders such as ``[REDACTED:aws-key]``. The store itself is never rewritten: only
what is written out. Summaries never copy a secret: :func:`mask_secrets` (no extra needed)
masks the credentials of a span before a summarizer reads it and in what it writes.

The secret patterns are Yelp's detect-secrets rules (its plugins' own regexes, maintained with
the scanner: AWS, GitHub, GitLab, Slack, Stripe, OpenAI, npm, PyPI, SendGrid, Twilio, JWT, URL
passwords, ...; and its keyword detector for ``password = ...`` and ``.env`` lines). A few
are added where its 1.5 rules have none: whole PEM private key blocks, Anthropic, newer OpenAI
and Google API keys, bearer tokens, e-mail addresses and home directories.
"""

from __future__ import annotations

import copy
import dataclasses
import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from .core.errors import CtxtoolError

# detect-secrets plugin -> placeholder type; "group 1" where its regex captures the secret
# inside what it matches (the password of a URL, a key after its name).
_DETECTORS = {
    "ArtifactoryDetector": "artifactory-token",
    "AWSKeyDetector": "aws-key",
    "AzureStorageKeyDetector": "azure-storage-key",
    "BasicAuthDetector": "url-password",
    "DiscordBotTokenDetector": "discord-token",
    "GitHubTokenDetector": "github-token",
    "GitLabTokenDetector": "gitlab-token",
    "JwtTokenDetector": "jwt",
    "MailchimpDetector": "mailchimp-key",
    "NpmDetector": "npm-token",
    "OpenAIDetector": "openai-key",
    "PypiTokenDetector": "pypi-token",
    "SendGridDetector": "sendgrid-key",
    "SlackDetector": "slack-token",
    "SquareOAuthDetector": "square-secret",
    "StripeDetector": "stripe-key",
    "TelegramBotTokenDetector": "telegram-token",
    "TwilioKeyDetector": "twilio-key",
}
_SECRET_IN_GROUP = {"BasicAuthDetector", "AWSKeyDetector"}

# A rule starts with its literal and checks the word boundary before it by a lookbehind
# (``sk-(?<=\bsk-)``, the same matches as ``\bsk-``): a pattern that starts with a literal is
# found by the re module's fast substring search, one that starts with ``\b`` is tried at every
# position (masking then became the largest cost of a compaction's CPU).
# What detect-secrets 1.5 has no rule for, or finds only part of (a private key's header, a
# JWT without its signature): tried before its rules, so the whole secret is replaced.
_SPECIFIC = [
    (
        "private-key",
        re.compile(
            r"-----BEGIN[A-Z0-9 ]{0,40} PRIVATE KEY( BLOCK)?-----"
            r"[\s\S]{0,20000}?-----END[A-Z0-9 ]{0,40} PRIVATE KEY( BLOCK)?-----"
        ),
        0,
    ),
    ("jwt", re.compile(r"eyJ(?<=\beyJ)[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*"), 0),
    ("anthropic-key", re.compile(r"sk-ant-(?<=\bsk-ant-)[A-Za-z0-9_-]{20,}"), 0),
    ("openai-key", re.compile(r"sk-(?<=\bsk-)(?:proj|svcacct|admin)-[A-Za-z0-9_-]{20,}"), 0),
    ("google-api-key", re.compile(r"AIza(?<=\bAIza)[0-9A-Za-z_-]{35}\b"), 0),
]
# Credentials by their shape, without detect-secrets: with _SPECIFIC and _CREDENTIAL_SHAPES,
# what a summary masks (an export has detect-secrets' own rules for these, and its keyword
# detector for assignments).
_BUILTIN = [
    (
        "github-token",
        re.compile(r"g(?<=\bg)(?:h[pousr]_[A-Za-z0-9]{20,}|ithub_pat_[A-Za-z0-9_]{20,})"),
        0,
    ),
    ("aws-key", re.compile(r"AKIA(?<=\bAKIA)[0-9A-Z]{16}\b"), 0),
    ("slack-token", re.compile(r"xox(?<=\bxox)[abprs]-[A-Za-z0-9-]{10,}"), 0),
    ("openai-key", re.compile(r"sk-(?<=\bsk-)[A-Za-z0-9_-]{16,}"), 0),
    ("url-password", re.compile(r"://[^/\s:@]+:([^@\s/]+)@"), 1),
    (
        "password",
        re.compile(
            r"(?i)[asp](?<=\b[asp])(?:(?<=a)(?:pi[_-]?key|ccess[_-]?token|uth[_-]?token)"
            r"|(?<=s)ecret|(?<=p)ass(?:word|wd))"
            r"\s*[=:]\s*[\"']?([^\s\"',;()]{4,})(?![\w.]*\()"  # a value, not a call
        ),
        1,
    ),
]
# What is left of a credential's shape once every secret rule was tried.
_CREDENTIAL_SHAPES = [
    ("bearer-token", re.compile(r"(?i)bearer(?<=\bbearer)\s+([A-Za-z0-9._~+/=-]{16,})"), 1),
    (
        "env-secret",
        re.compile(
            r"(?m)^[ \t]*(?:export[ \t]+)?[A-Z0-9_]*(?:PASSWORD|PASSWD|SECRET|TOKEN|API_?KEY"
            r"|ACCESS_KEY|PRIVATE_KEY|CREDENTIALS?)[A-Z0-9_]*=[\"']?([^\s\"'#]{4,})"
        ),
        1,
    ),
]
SUMMARY_PLACEHOLDER = "[redacted]"
# Tried after every secret rule in an export: credential shapes, then personal data (a
# summary keeps paths and addresses: they are what the agent works on).
_GENERAL = _CREDENTIAL_SHAPES + [
    (
        "email",
        re.compile(
            r"\b[A-Za-z0-9._%+-]{1,64}@[A-Za-z0-9-]{1,63}(?:\.[A-Za-z0-9-]{1,63})*\.[A-Za-z]{2,24}\b"
        ),
        0,
    ),
    (
        "home-dir",
        re.compile(r"(?:/home/|/Users/|[A-Za-z]:\\{1,2}Users\\{1,2})[^/\\\s\"'<>:*?|]+"),
        0,
    ),
]


FINDING_COLUMNS = ["kind", "where", "excerpt"]


@dataclass(frozen=True)
class Finding:
    """One replacement: its type, where (as the caller names it), and a masked excerpt."""

    kind: str
    where: str
    excerpt: str

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)


def _take(chosen: list[tuple[int, int, str]], start: int, stop: int, kind: str) -> None:
    """Add a span unless it overlaps one chosen before (the rule tried first wins)."""
    if stop > start and all(stop <= s or start >= e for s, e, _ in chosen):
        chosen.append((start, stop, kind))


def _matches(
    text: str, rules: list[tuple[str, re.Pattern, int]], chosen: list[tuple[int, int, str]]
) -> None:
    for kind, pattern, group in rules:
        for m in pattern.finditer(text):
            _take(chosen, m.start(group), m.end(group), kind)


_SUMMARY_RULES = _SPECIFIC + _BUILTIN + _CREDENTIAL_SHAPES
# What every match of a rule contains: a text without any of these words is not searched with
# that rule. (ignore case, words): a rule that ignores case is checked on the lowered text, and
# only when the text is ASCII (where ignoring case is lowering it). First for the rules tried
# at many positions (at each a, s or p; at each line's start); then for those led by their
# literal, whose search still reads the whole text at about 3 ns a character where ``in``
# reads it many times faster: a span's 19 KB without a credential was masked in 0.45 ms, most
# of it these searches finding nothing.
_NEEDED = {
    "private-key": (False, ("-----BEGIN",)),
    "jwt": (False, ("eyJ",)),
    "anthropic-key": (False, ("sk-ant-",)),
    "openai-key": (False, ("sk-",)),  # both openai-key rules
    "google-api-key": (False, ("AIza",)),
    "github-token": (False, ("gh", "github_pat_")),
    "aws-key": (False, ("AKIA",)),
    "slack-token": (False, ("xox",)),
    "url-password": (False, ("://",)),
    "password": (True, ("api", "access", "auth", "secret", "pass")),
    "bearer-token": (True, ("bearer",)),
    "env-secret": (
        False,
        ("PASSW", "SECRET", "TOKEN", "API", "ACCESS_KEY", "PRIVATE_KEY", "CREDENTIAL"),
    ),
}


def _least_words(words: set[str]) -> tuple[str, ...]:
    """``words`` less those holding another of them (a text holding one holds the other)."""
    return tuple(sorted(w for w in words if not any(o != w and o in w for o in words)))


# Each rule with its words: (kind, pattern, group, ignore case, words; no words: searched).
_CHECKED = [(k, p, g, *_NEEDED.get(k, (False, ()))) for k, p, g in _SUMMARY_RULES]
# Every rule's words, lowered: an ASCII text whose lowered form holds none of them holds no
# match of any rule (lowering an ASCII text keeps each word it holds, lowered). None when a rule
# has no words: then no text is passed over whole.
_ANY_WORD: tuple[str, ...] | None = (
    _least_words({w.lower() for _, _, _, _, words in _CHECKED for w in words})
    if all(words for *_, words in _CHECKED)
    else None
)


def mask_secrets(text: str, placeholder: str = SUMMARY_PLACEHOLDER) -> str:
    """``text`` with its credentials (API keys, tokens, private keys, bearer headers, a URL's
    password, ``password=`` / ``api_key:`` values) replaced by ``placeholder``: what a summary
    may never copy. Paths and e-mail addresses stay (the agent works on them); no extra needed,
    so every summarizer masks."""
    if not text:
        return text
    lowered = text.lower() if text.isascii() else None
    if (
        lowered is not None
        and _ANY_WORD is not None
        and not any(map(lowered.__contains__, _ANY_WORD))
    ):
        return text
    chosen: list[tuple[int, int, str]] = []
    for kind, pattern, group, ignore_case, words in _CHECKED:
        if words:
            if not ignore_case:
                if not any(map(text.__contains__, words)):
                    continue
            elif lowered is not None and not any(map(lowered.__contains__, words)):
                continue
        for m in pattern.finditer(text):
            _take(chosen, m.start(group), m.end(group), kind)
    if not chosen:
        return text
    out, last = [], 0
    for start, stop, _ in sorted(chosen):
        out += [text[last:start], placeholder]
        last = stop
    return "".join(out) + text[last:]


def _detect_secrets_patterns() -> list[tuple[str, re.Pattern, int]]:
    """detect-secrets' rules, imported on first use (the optional extra ctxtool[redact]; a
    third of a second to import, which a summarizer never pays)."""
    try:
        from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class
    except ImportError:
        raise CtxtoolError(
            "--redact needs the detect-secrets package: pip install 'ctxtool[redact]'"
        ) from None
    out: list[tuple[str, re.Pattern, int]] = []
    plugin: type  # a detector class
    for plugin in get_mapping_from_secret_type_to_class().values():
        kind = _DETECTORS.get(plugin.__name__)
        if kind is None:
            continue
        for pattern in getattr(plugin, "denylist", ()):
            group = 1 if plugin.__name__ in _SECRET_IN_GROUP and pattern.groups else 0
            out.append((kind, pattern, group))
    return out


RECENT_TEXTS = 256


class Redactor:
    """Finds and replaces; counts what it replaced, by type, and keeps the findings (for
    --redact-preview) when asked to."""

    def __init__(self, keep_findings: bool = False):
        self.patterns = _SPECIFIC + _detect_secrets_patterns()
        from detect_secrets.plugins.keyword import KeywordDetector

        self.keyword = KeywordDetector()
        self.counts: Counter = Counter()
        self.findings: list[Finding] | None = [] if keep_findings else None
        self._listed: set[Finding] = set()
        # The spans of the texts seen last: an exported message holds its text twice (the
        # record and the OpenAI message made of it), and finding them is the cost.
        self._recent: dict[str, list[tuple[int, int, str]]] = {}

    def spans(self, text: str) -> list[tuple[int, int, str]]:
        """(start, end, type) of what to replace, in text order. Where two rules overlap,
        the one tried first wins: the specific secret rules, then detect-secrets' keyword
        detector, then bearer tokens, .env secrets, e-mail addresses and home directories."""
        chosen: list[tuple[int, int, str]] = []
        _matches(text, self.patterns, chosen)
        for line_start, line in _lines(text):
            if "=" in line or ":" in line:
                for secret in self.keyword.analyze_line(filename="x.env", line=line):
                    value = secret.secret_value or ""
                    at = line.find(value) if len(value) >= 4 else -1
                    if at >= 0:
                        _take(chosen, line_start + at, line_start + at + len(value), "password")
        _matches(text, _GENERAL, chosen)
        return sorted(chosen)

    def text(self, text: str, where: str = "") -> str:
        if not text:
            return text
        out, last = [], 0
        spans = self._recent.get(text)
        if spans is None:
            if len(self._recent) >= RECENT_TEXTS:
                self._recent.clear()
            spans = self._recent[text] = self.spans(text)
        for start, stop, kind in spans:
            out.append(text[last:start])
            out.append(f"[REDACTED:{kind}]")
            last = stop
            self.counts[kind] += 1
            if self.findings is not None:
                finding = Finding(kind, where, _masked(text[start:stop]))
                if finding not in self._listed:  # one text can be output twice (an export's
                    self._listed.add(finding)  # OpenAI message and the message it renders)
                    self.findings.append(finding)
        if not out:
            return text
        out.append(text[last:])
        return "".join(out)

    def value(self, value: Any, where: str = "") -> Any:
        """``value`` with every string in it redacted: dicts and lists in place, dataclass
        fields set (frozen ones too: these are copies made for output), tuples rebuilt."""
        return self._walk(value, where, set())

    def _walk(self, value: Any, where: str, seen: set[int]) -> Any:
        if isinstance(value, str):
            return self.text(value, where)
        if isinstance(value, (int, float, bool)) or value is None or id(value) in seen:
            return value
        seen.add(id(value))
        if isinstance(value, dict):
            for k, v in value.items():
                value[k] = self._walk(v, where, seen)
        elif isinstance(value, list):
            value[:] = [self._walk(v, where, seen) for v in value]
        elif isinstance(value, tuple):
            return tuple(self._walk(v, where, seen) for v in value)
        elif dataclasses.is_dataclass(value) and not isinstance(value, type):
            for f in dataclasses.fields(value):
                old = getattr(value, f.name)
                new = self._walk(old, where, seen)
                if new is not old:
                    object.__setattr__(value, f.name, new)
        return value


def _lines(text: str) -> Iterator[tuple[int, str]]:
    at = 0
    for line in text.splitlines(keepends=True):
        yield at, line
        at += len(line)


def _masked(secret: str) -> str:
    """Enough to recognise what was found, never the secret: its first characters and size."""
    shown = secret[:4] if len(secret) > 12 else secret[:1]
    return f"{shown}… ({len(secret)} chars)"


def without_cut_word(text: str | None) -> str | None:
    """A text cut short with "…" (a session's title, its first request shortened) without the
    word the cut split: half a secret no longer matches its rule, and its first half would be
    shown (``alice.secret…`` of an e-mail address)."""
    if not text or not text.endswith("…") or text[-2:-1].isspace():
        return text
    space = max(text.rfind(" "), text.rfind("\n"))
    return text[: space + 1] + "…" if space >= 0 else "…"


def _redacted_session(session, redactor: Redactor):
    """A copy of ``session`` redacted, its shortened title without the word its cut split."""
    session = copy.deepcopy(session)
    object.__setattr__(session, "title", without_cut_word(session.title))
    return redactor.value(session, "session")


def redact_stream(stream, redactor: Redactor) -> None:
    """Redact an exported context read a page at a time (``inspection.ContextStream``) as
    :func:`redact_view` redacts a whole one: the session's title and prompt and the
    checkpoint's summary (copies: the history they came from keeps them), then each message
    as it is read. Its tokens are counted before, as a view's are."""
    stream.session = _redacted_session(stream.session, redactor)
    stream.point = redactor.value(copy.deepcopy(stream.point), "checkpoint")
    stream.item_filter = lambda item: redactor.value(
        item, f"message {item.id}" if item.id is not None else item.kind
    )


def redact_view(view, redactor: Redactor) -> None:
    """Redact an exported context (``inspection.ContextView``) in place: its messages (named
    by id in the findings), the session's title and prompt, the checkpoint's summary (copies:
    the history the view came from keeps them)."""
    for item in view.items:
        redactor.value(item, f"message {item.id}" if item.id is not None else item.kind)
    view.session = _redacted_session(view.session, redactor)
    view.context = redactor.value(copy.deepcopy(view.context), "context")
    view.point = redactor.value(copy.deepcopy(view.point), "checkpoint")
