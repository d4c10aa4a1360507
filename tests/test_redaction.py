"""Issue 32 item 4: redaction on the way out. `context export --redact` and `sessions archive
--redact` write typed placeholders instead of secrets, e-mail addresses and home directories;
--redact-preview lists what and where (never the secret itself); the store is never
rewritten."""

from __future__ import annotations

import json

import pytest

from ctxtool import redaction
from ctxtool.redaction import Redactor

AWS = "AKIAIOSFODNN7EXAMPLE"
GITHUB = "ghp_" + "a1B2c3D4e5" * 3 + "f6G7h8"
PEM = "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\nQyNTUxOQ\n-----END OPENSSH PRIVATE KEY-----"


@pytest.mark.parametrize(
    "text,redacted",
    [
        (f"export AWS_ACCESS_KEY_ID={AWS}", "export AWS_ACCESS_KEY_ID=[REDACTED:aws-key]"),
        (f"token {GITHUB} here", "token [REDACTED:github-token] here"),
        ("xoxb-123456789012-1234567890123-abcdefghijklmnopqrstuvwx", "[REDACTED:slack-token]"),
        ("key sk_live_abcdefghijklmnopqrstuvwx.", "key [REDACTED:stripe-key]."),
        (
            "ANTHROPIC_API_KEY=sk-ant-api03-Abcdefghijklmnopqrstuvwxyz012",
            "ANTHROPIC_API_KEY=[REDACTED:anthropic-key]",
        ),
        (
            "OPENAI_API_KEY=sk-proj-abcdefghijklmnopqrstuvwxyz0123",
            "OPENAI_API_KEY=[REDACTED:openai-key]",
        ),
        (
            "git clone https://bob:hunter2pass@github.com/o/r",
            "git clone https://bob:[REDACTED:url-password]@github.com/o/r",
        ),
        (
            'curl -H "Authorization: Bearer abcdefghijklmnop1234"',
            'curl -H "Authorization: Bearer [REDACTED:bearer-token]"',
        ),
        (
            "DATABASE_PASSWORD=correcthorsebattery\nDEBUG=1",
            "DATABASE_PASSWORD=[REDACTED:env-secret]\nDEBUG=1",
        ),
        ('db_password = "s3cr3tpass"', 'db_password = "[REDACTED:password]"'),
        (f"key:\n{PEM}\nend", "key:\n[REDACTED:private-key]\nend"),
        (
            "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
            "[REDACTED:jwt]",
        ),
        ("write to alice.smith@example.com", "write to [REDACTED:email]"),
        (
            "open /home/alice/proj/a.py or /Users/bob/b",
            "open [REDACTED:home-dir]/proj/a.py or [REDACTED:home-dir]/b",
        ),
        ("C:\\Users\\carol\\repo", "[REDACTED:home-dir]\\repo"),
    ],
)
def test_each_kind_of_secret_gets_its_typed_placeholder(text, redacted):
    assert Redactor().text(text) == redacted


def test_ordinary_text_and_code_are_left_alone():
    texts = [
        "def f(x):\n    return x + 1  # token: none",
        "see https://docs.python.org/3/library/re.html#re.sub",
        "/usr/local/bin/python3 -m pytest tests/",
        "password = input()",
        "the commit a94a8fe5ccb19ba61c4c0873d391e987982fbbd3 fixed it",
    ]
    redactor = Redactor()
    assert [redactor.text(t) for t in texts] == texts and not redactor.counts


def test_values_are_redacted_through_every_container_and_counted():
    redactor = Redactor(keep_findings=True)
    record = {
        "content": f"use {AWS}",
        "tool_calls": [{"function": {"arguments": '{"k": "' + GITHUB + '"}'}}],
    }
    redactor.value(record, "message 7")
    assert record["content"] == "use [REDACTED:aws-key]"
    assert json.loads(record["tool_calls"][0]["function"]["arguments"]) == {
        "k": "[REDACTED:github-token]"
    }
    assert redactor.counts == {"aws-key": 1, "github-token": 1}
    assert [(f.kind, f.where) for f in redactor.findings] == [
        ("aws-key", "message 7"),
        ("github-token", "message 7"),
    ]
    assert all(AWS not in f.excerpt and GITHUB not in f.excerpt for f in redactor.findings)


def _secret_session(cli, db, tmp_path):
    path = tmp_path / "secrets.jsonl"
    lines = [
        {"role": "system", "content": "You work in /home/alice/project."},
        {"role": "user", "content": f"deploy with {AWS} and tell ops@example.com"},
        {
            "role": "assistant",
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {
                        "name": "sh",
                        "arguments": json.dumps({"cmd": f"export TOKEN={GITHUB}"}),
                    },
                }
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": PEM},
        {"role": "assistant", "content": "done"},
    ]
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    result = cli("--db", db.url, "import", path)
    assert result.exit_code == 0, result.output
    return db.rows("SELECT id, content, tool_calls FROM agent_message ORDER BY id")


def test_export_redacts_every_format_and_never_the_store(db, cli, tmp_path):
    stored = _secret_session(cli, db, tmp_path)
    for fmt in ("jsonl", "markdown", "html"):
        out = tmp_path / f"export.{fmt}"
        result = cli(
            "--db", db.url, "context", "export", "1", "--format", fmt, "--redact", "-o", out
        )
        assert result.exit_code == 0, result.output
        text = out.read_text()
        for secret in (AWS, GITHUB, "BEGIN OPENSSH PRIVATE KEY", "ops@example.com", "/home/alice"):
            assert secret not in text, (fmt, secret)
        for placeholder in ("aws-key", "github-token", "private-key", "email", "home-dir"):
            assert f"[REDACTED:{placeholder}]" in text, (fmt, placeholder)
    plain = cli("--db", db.url, "context", "export", "1", "--format", "jsonl")
    assert AWS in plain.output  # without --redact, as it is
    assert db.rows("SELECT id, content, tool_calls FROM agent_message ORDER BY id") == stored

    preview = cli("--db", db.url, "context", "export", "1", "--redact-preview")
    assert preview.exit_code == 0, preview.output
    assert "aws-key" in preview.output and "message 1" in preview.output
    assert "private-key" in preview.output and "message 3" in preview.output
    assert AWS not in preview.output and GITHUB not in preview.output


def test_archive_redacts_its_files_and_such_an_archive_purges_nothing(db, cli, tmp_path):
    stored = _secret_session(cli, db, tmp_path)
    archive = tmp_path / "archive"
    preview = cli(
        "--db", db.url, "sessions", "archive", "-o", archive, "--redact-preview", "--json"
    )
    assert preview.exit_code == 0, preview.output
    found = json.loads(preview.stdout)
    assert {
        "kind": "aws-key",
        "where": "session 1 message 1 content",
        "excerpt": "AKIA… (20 chars)",
    } in found
    assert not archive.exists()  # a preview writes nothing

    result = cli("--db", db.url, "sessions", "archive", "-o", archive, "--redact", "--json")
    assert result.exit_code == 0, result.output
    [entry] = json.loads(result.stdout)
    # the title (the first user message) and the system prompt are written out too
    assert entry["redacted"] == {
        "aws-key": 2,
        "email": 2,
        "github-token": 1,
        "home-dir": 1,
        "private-key": 1,
    }
    text = (archive / "session-1.jsonl").read_text()
    assert AWS not in text and GITHUB not in text and "[REDACTED:private-key]" in text
    refused = cli("--db", db.url, "sessions", "purge", "-a", archive)
    assert refused.exit_code == 1 and "its archive is redacted" in refused.output
    assert db.rows("SELECT id, content, tool_calls FROM agent_message ORDER BY id") == stored


@pytest.mark.parametrize(
    "text,masked",
    [
        (f"export AWS_ACCESS_KEY_ID={AWS}", "export AWS_ACCESS_KEY_ID=[redacted]"),
        (f"token {GITHUB} here", "token [redacted] here"),
        ("OPENAI_API_KEY=sk-proj-abcdefghijklmnopqrstuvwxyz0123", "OPENAI_API_KEY=[redacted]"),
        ("key sk-abcdefghijklmnop1234 ok", "key [redacted] ok"),
        ("https://bob:hunter2pass@github.com/o/r", "https://bob:[redacted]@github.com/o/r"),
        ("Authorization: Bearer abcdefghijklmnop1234", "Authorization: Bearer [redacted]"),
        ('password = "s3cr3t-value"', 'password = "[redacted]"'),
        (f"key:\n{PEM}\n", "key:\n[redacted]\n"),
        # What the agent works on stays: paths, addresses, ordinary words.
        ("edit /home/alice/src/app.py for bob@example.com", None),
        ("the secret sauce is tests", None),
        ("password = input()", None),
    ],
)
def test_what_a_summary_may_never_copy(text, masked):
    """One place says what a secret is: summaries mask with the export's rules that need no
    extra (the specific shapes and credential shapes), never paths or e-mail addresses."""
    from ctxtool.redaction import mask_secrets

    assert mask_secrets(text) == (text if masked is None else masked)


def test_summarizers_do_not_load_detect_secrets():
    """detect-secrets takes a third of a second to import: only --redact pays it."""
    import subprocess
    import sys

    code = (
        "import sys, ctxtool.compaction.summarizers, ctxtool.redaction; "
        "print(any(m.startswith('detect_secrets') for m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


# Each rule as it reads with ``\b`` first; redaction.py writes the boundary as a lookbehind
# after the rule's literal (found by a fast substring search). They must match the same spans.
_WORD_BOUNDARY_FIRST = {
    ("jwt", 0): r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*",
    ("anthropic-key", 0): r"\bsk-ant-[A-Za-z0-9_-]{20,}",
    ("openai-key", 0): r"\bsk-(?:proj|svcacct|admin)-[A-Za-z0-9_-]{20,}",
    ("google-api-key", 0): r"\bAIza[0-9A-Za-z_-]{35}\b",
    ("github-token", 0): r"\b(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,})",
    ("aws-key", 0): r"\bAKIA[0-9A-Z]{16}\b",
    ("slack-token", 0): r"\bxox[abprs]-[A-Za-z0-9-]{10,}",
    ("openai-key", 1): r"\bsk-[A-Za-z0-9_-]{16,}",
    ("password", 0): r"(?i)\b(?:api[_-]?key|access[_-]?token|auth[_-]?token|secret|password"
    r"|passwd)\s*[=:]\s*[\"']?([^\s\"',;()]{4,})(?![\w.]*\()",
    ("bearer-token", 0): r"(?i)\bbearer\s+([A-Za-z0-9._~+/=-]{16,})",
}
_PIECES = [
    "sk-",
    "sk-ant-",
    "sk-proj-",
    "eyJ",
    "AIza",
    "AKIA",
    "xoxb-",
    "ghp_",
    "github_pat_",
    "api_key",
    "API-KEY",
    "access_token",
    "AUTH-token",
    "secret",
    "SeCrEt",
    "ſecret",
    "password",
    "PASSWD",
    "pass",
    "bearer ",
    "Bearer\t",
    "= ",
    ": ",
    "'",
    '"',
    "=",
    "(",
    ".",
    "_",
    "-",
    " ",
    "\n",
    "x",
    "é",
    "K",
    "ABCDEFGHIJKLMNOP",
    "abcdefghij0123456789",
    "QRSTUVWXYZ_-",
    "0",
    "9",
    "ä",
    "İ",
    "ı",
]


def test_the_rules_written_literal_first_match_as_with_the_boundary_first():
    import re

    from hypothesis import given, settings
    from hypothesis import strategies as st

    from ctxtool import redaction

    rules = redaction._SPECIFIC + redaction._BUILTIN + redaction._CREDENTIAL_SHAPES
    pairs = []
    for (kind, nth), reference in _WORD_BOUNDARY_FIRST.items():
        fast = [p for k, p, _ in rules if k == kind][nth]
        pairs.append((re.compile(reference), fast))

    @settings(max_examples=1500, deadline=None)
    @given(st.lists(st.sampled_from(_PIECES), max_size=40).map("".join))
    def same(text):
        for reference, fast in pairs:
            assert [m.span(0) + m.span(m.lastindex or 0) for m in reference.finditer(text)] == [
                m.span(0) + m.span(m.lastindex or 0) for m in fast.finditer(text)
            ], (reference.pattern, text)

    same()


def test_a_streamed_redaction_writes_what_the_whole_view_redacted_writes(db, cli, tmp_path):
    """`context export --redact` reads a page at a time (``redact_stream``): each format's
    text, and what --redact-preview lists, are those of the whole view redacted at once
    (``redact_view``), with the checkpoint's summary and the session's prompt redacted too;
    the history the stream came from keeps its texts."""
    import sqlalchemy as sa

    from ctxtool.export import export_pieces, render
    from ctxtool.redaction import redact_stream, redact_view
    from ctxtool.store import Store
    from ctxtool.store.outline import stream_context
    from ctxtool.store.reads import SessionHistory

    stored = _secret_session(cli, db, tmp_path)
    with db.engine.begin() as conn:
        conn.execute(
            sa.text(
                "INSERT INTO agent_compaction (session_id, summary, first_kept_message_id) "
                "VALUES (1, :s, :f)"
            ),
            {"s": f"Deployed with {AWS}; mail ops@example.com", "f": stored[1]["id"]},
        )
    history = SessionHistory(Store(db.engine), "1")
    for fmt in ("markdown", "jsonl", "html"):
        whole = Redactor(keep_findings=True)
        view = history.view(None, False)
        redact_view(view, whole)
        streamed = Redactor(keep_findings=True)
        stream = stream_context(SessionHistory(Store(db.engine), "1"), page_entries=2)
        redact_stream(stream, streamed)
        text = "".join(export_pieces(stream, fmt, history.compactions))
        assert text == render(view, fmt, history.compactions), fmt
        assert AWS not in text and "[REDACTED:aws-key]" in text
        assert "/home/alice" not in text and "ops@example.com" not in text
        ours = {(f.kind, f.where) for f in streamed.findings}
        theirs = {(f.kind, f.where) for f in whole.findings if f.where != "context"}
        assert ours == theirs and ("aws-key", "checkpoint") in ours, fmt
    assert AWS in history.compactions[-1].summary and "alice" in history.session.system_prompt

    preview = cli("--db", db.url, "context", "export", "1", "--redact-preview", "--json")
    assert preview.exit_code == 0, preview.output
    found = {(f["kind"], f["where"]) for f in json.loads(preview.stdout)}
    assert ("aws-key", "checkpoint") in found and ("private-key", "message 3") in found
    assert AWS not in preview.output
    for misuse in (["--json"], ["--fmt", "github"], ["--redact-preview", "-o", "x.md"]):
        misused = cli("--db", db.url, "context", "export", "1", *misuse)
        assert misused.exit_code == 2 and "--redact-preview" in misused.output, misuse


def test_a_text_seen_again_is_counted_and_listed_where_it_stands():
    """The spans of a recent text are found once (an exported message holds its text twice);
    each occurrence is still counted, and listed under each place it stands."""
    redactor = Redactor(keep_findings=True)
    text = f"key {AWS}"
    out = [redactor.text(text, where) for where in ("message 1", "message 1", "message 2")]
    assert out == ["key [REDACTED:aws-key]"] * 3
    assert redactor.counts == {"aws-key": 3}
    assert [f.where for f in redactor.findings] == ["message 1", "message 2"]
    for n in range(600):  # more texts than it remembers: found again, the same way
        assert redactor.text(f"{n} {AWS}") == f"{n} [REDACTED:aws-key]"
    assert redactor.text(text, "message 3") == "key [REDACTED:aws-key]"
    assert redactor.counts == {"aws-key": 604}


def test_a_shortened_title_loses_the_word_its_cut_split(db, cli, tmp_path):
    """A session's title is its first request shortened with "…": an address the cut split
    (``alice.secret…``) matches no rule, so the redacted export and archive drop the split word
    (review finding: the local part showed in the HTML title and heading)."""
    from ctxtool.redaction import without_cut_word

    assert without_cut_word("mail it to alice.secret…") == "mail it to …"
    assert without_cut_word("mail it to …") == "mail it to …"
    assert without_cut_word("alicesecret…") == "…"
    assert without_cut_word("whole title") == "whole title"
    path = tmp_path / "t.jsonl"
    lead = "please send the weekly report to "
    lead += "x" * (79 - len("alice.secret") - len(lead) - 1) + " "  # the cut: after "secret"
    request = lead + "alice.secret@example.org now"
    path.write_text(json.dumps({"role": "user", "content": request}) + "\n")
    assert cli("--db", db.url, "import", path).exit_code == 0
    [title] = [r["title"] for r in db.rows("SELECT title FROM agent_session")]
    assert title.endswith(" alice.secret…"), title  # the premise: the cut splits the address
    for fmt in ("html", "markdown", "jsonl"):
        out = cli("--db", db.url, "context", "export", "1", "--format", fmt, "--redact")
        assert out.exit_code == 0, out.output
        assert "alice.secret" not in out.output, fmt
    archive = tmp_path / "archive"
    done = cli("--db", db.url, "sessions", "archive", "-o", archive, "--redact")
    assert done.exit_code == 0, done.output
    assert not any("alice.secret" in f.read_text() for f in archive.iterdir())


def _masked_by_every_rule(text: str) -> str:
    """mask_secrets without its words check: every rule searched on the whole text."""
    chosen: list[tuple[int, int, str]] = []
    redaction._matches(text, redaction._SUMMARY_RULES, chosen)
    out, last = [], 0
    for start, stop, _ in sorted(chosen):
        out += [text[last:start], redaction.SUMMARY_PLACEHOLDER]
        last = stop
    return "".join(out) + text[last:]


@pytest.mark.parametrize(
    "text",
    [
        "Authorization: BeArEr abcdefghijklmnop1234",
        "PaSsWoRd = hunter2hunter2",
        "x-Access_Token: abcdefgh1234 and auth-token=zzzzzzzz",
        "SECRET: zyxwvuts",
        "  export DB_PASSWORD=abcdefgh\nAPI_KEY='abcd1234'\nMY_CREDENTIALS=qwertyui",
        "ſecret: abcdefgh and Bearer ſſſſabcdefghijklmnop",  # not ASCII: every rule searched
        "café api_key: abcdefgh1234",
        "nothing to mask in this line",
    ],
)
def test_mask_secrets_passing_over_a_rule_masks_what_every_rule_masks(text):
    """A rule whose words a text lacks is not searched (masking's cost): what it masks is
    still what searching every rule masks."""
    assert redaction.mask_secrets(text) == _masked_by_every_rule(text)


def test_a_redacted_archive_carries_no_count_of_the_text_it_replaced(db, cli, tmp_path):
    """Import keeps a digest and a count of each system prompt and summary it counts
    (ctxtool_counts): written out beside the redacted text, they let anyone check guesses of
    a weak secret offline. A redacted archive leaves them out; a plain one keeps them."""
    from ctxtool.core.context_size import HEAD_COUNTS_KEY, text_digest
    from ctxtool.core.records import SUMMARY_PREFIX

    key = "sk-proj-AbCdEfGhIjKlMnOpQrStUvWx0123"
    prompt = f"You deploy with OPENAI_API_KEY={key} and never print it."
    summary = f"Deployed; the key {key} is set in the environment."
    chat = tmp_path / "chat.jsonl"
    chat.write_text(
        json.dumps({"role": "system", "content": prompt})
        + "\n"
        + json.dumps({"role": "user", "content": "Deploy the app."})
        + "\n"
    )
    at = "2026-05-12T01:02:27.000Z"
    pi = [
        {"type": "session", "version": 3, "id": "pi-redact", "timestamp": at, "cwd": "/tmp/p"},
        {"type": "model_change", "id": "m0", "parentId": None, "timestamp": at,
         "provider": "openai", "modelId": "gpt-4o"},
        {"type": "message", "id": "u1", "parentId": "m0", "timestamp": at,
         "message": {"role": "user", "content": [{"type": "text", "text": "Deploy."}]}},
        {"type": "compaction", "id": "c1", "parentId": "u1", "timestamp": at,
         "summary": summary, "firstKeptEntryId": "u1", "tokensBefore": 9},
    ]  # fmt: skip
    (tmp_path / "pi.jsonl").write_text("".join(json.dumps(e) + "\n" for e in pi))
    for path, fmt in ((chat, "openai-chat"), (tmp_path / "pi.jsonl", "pi")):
        assert cli("--db", db.url, "import", "--format", fmt, path).exit_code == 0
    digests = [text_digest(prompt), text_digest(SUMMARY_PREFIX + summary)]
    stored = db.scalar("SELECT details FROM agent_session WHERE session_id = 1")
    stored += db.scalar("SELECT details FROM agent_compaction WHERE session_id = 2")
    assert all(d in stored for d in digests)  # the premise: the store keeps them

    plain, redacted = tmp_path / "plain", tmp_path / "redacted"
    assert cli("--db", db.url, "sessions", "archive", "-o", plain).exit_code == 0
    done = cli("--db", db.url, "sessions", "archive", "-o", redacted, "--redact")
    assert done.exit_code == 0, done.output
    text = "".join(f.read_text() for f in sorted(redacted.glob("session-*.jsonl")))
    assert key not in text and "[REDACTED:openai-key]" in text
    assert HEAD_COUNTS_KEY not in text and not any(d in text for d in digests)
    kept = "".join(f.read_text() for f in sorted(plain.glob("session-*.jsonl")))
    assert all(d in kept for d in digests)


_CREDENTIAL_PIECES = _PIECES + [
    "-----BEGIN RSA PRIVATE KEY-----",
    "-----END RSA PRIVATE KEY-----",
    "-----BEGIN",
    "https://",
    "://",
    "bob:",
    "@",
    "export ",
    "DB_PASSWORD",
    "MY_TOKEN",
    "AWS_SECRET_ACCESS_KEY",
    "GOOGLE_API_KEY",
    "X_PRIVATE_KEY",
    "CREDENTIALS",
    "gh",
    "GH",
    "p_",
    "o_",
    "eyJhbGciOiJIUzI1NiJ9.",
    "xoxp-",
    "AIzaSyA1234567890abcdefghijklmnopqrstu",
    "\t",
]


def test_every_match_of_a_summary_rule_holds_one_of_its_words():
    """mask_secrets passes over a rule (and an ASCII text over every rule) when the text lacks
    the rule's words: that masks what every rule masks only if each match holds one of them.
    Were a word wrong (``gh`` written ``ghp``), a credential of that form would go unmasked."""
    from hypothesis import given, settings
    from hypothesis import strategies as st

    assert redaction._ANY_WORD is not None  # every rule has its words: clean texts pass whole
    assert {k for k, *_ in redaction._SUMMARY_RULES} == set(redaction._NEEDED)

    @settings(max_examples=1500, deadline=None)
    @given(st.lists(st.sampled_from(_CREDENTIAL_PIECES), max_size=40).map("".join))
    def holds(text):
        for kind, pattern, _group, ignore_case, words in redaction._CHECKED:
            for m in pattern.finditer(text):
                found = m.group(0)
                if ignore_case:
                    if not found.isascii():  # a text not ASCII is searched with every rule
                        continue
                    found = found.lower()
                assert any(w in found for w in words), (kind, found)
                assert any(w in found.lower() for w in redaction._ANY_WORD), (kind, found)
        assert redaction.mask_secrets(text) == _masked_by_every_rule(text), text

    holds()


def test_masking_the_shared_transcripts_masks_what_every_rule_masks():
    """Every line of the real transcripts (their JSON as written: messages, tool results,
    commands), masked with the words checks and with every rule searched: the same text."""
    from .conftest import TRANSCRIPTS

    files = sorted(p for p in TRANSCRIPTS.rglob("*") if p.suffix in (".jsonl", ".json"))
    assert len(files) >= 20
    masked = 0
    for path in files:
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
            expected = _masked_by_every_rule(line)
            assert redaction.mask_secrets(line) == expected, (path.name, line[:200])
            masked += expected != line
    assert masked > 0  # the premise: some lines hold a credential's shape
