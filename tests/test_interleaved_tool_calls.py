"""Two assistant messages with a tool call each, then their two tool results.

Some runtimes store parallel calls as one assistant message per call, and the results after
them all: assistant(call a), assistant(call b), tool(a), tool(b). In id order, then, result a
does not follow the message with its call. A cut must never fall between a call and its
result (at assistant(b), at tool(a) or at tool(b)), and the restored context must stay valid
for Chat Completions: each tool message right after the assistant message with its call, or
after that message's other results (the API refuses anything else).

Sessions a runtime wrote (results in call order, and reversed), compacted through the CLI at
every keep-recent budget that moves the cut, on SQLite and MariaDB: every checkpoint cuts at
a safe place, the restored context, `context show --json` and `context export --format
jsonl` send each result after its call, `compact --dry-run` names the cut the real run makes, and validate finds nothing.
"""

from __future__ import annotations

import json

from ctxtool.core.plan import plan_message, safe_cuts
from ctxtool.store import Store

from .builders import add_session

WINDOW = ["--context-window", "4000", "--reserve-tokens", "500", "--min-quality", "0"]


def _call(call_id: str, path: str) -> dict:
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": "read", "arguments": json.dumps({"path": path})},
    }


def interleaved_session(turns: int, steps: int, reversed_results: bool = False) -> list[dict]:
    """Each turn: a request, ``steps`` times two assistant messages calling one tool each and
    the two results (in call order, or reversed), then a reply."""
    out: list[dict] = []
    for t in range(turns):
        out.append({"role": "user", "content": f"Turn {t}: compare the files of src/{t}/."})
        for s in range(steps):
            a, b = f"call_{t}_{s}_a", f"call_{t}_{s}_b"
            for c in (a, b):
                call = _call(c, f"src/{t}/{c}.py")
                out.append({"role": "assistant", "content": None, "tool_calls": [call]})
            results = [
                {"role": "tool", "tool_call_id": c, "content": f"{c}: " + f"line of {c}\n" * 30}
                for c in (a, b)
            ]
            out.extend(reversed(results) if reversed_results else results)
        out.append({"role": "assistant", "content": f"Turn {t}: the files differ in one line."})
    return out


def _place(messages, at: int) -> str:
    """What the message at ``at`` is in its turn."""
    m = messages[at]
    if m.role == "tool":
        return "result"
    if m.tool_calls:
        return "first call" if messages[at - 1].role != "assistant" else "second call"
    return "request" if m.role == "user" else "reply"


def chat_ordered(messages: list[dict]) -> None:
    """Chat Completions' rule: the tool messages after an assistant message with tool calls
    answer those calls, each once, before any other message."""
    open_calls: set[str] = set()
    for m in messages:
        if m["role"] == "tool":
            assert m["tool_call_id"] in open_calls, f"{m['tool_call_id']} not after its call"
            open_calls.discard(m["tool_call_id"])
            continue
        assert not open_calls, f"calls {sorted(open_calls)} unanswered before a {m['role']}"
        open_calls = {c["id"] for c in m.get("tool_calls") or ()}


def test_a_cut_never_separates_interleaved_calls_from_their_results(db, cli):
    store = Store(db.engine)
    sessions = {}
    sid = 0
    # Six turns of one step (cuts at turn boundaries), and one turn of eight steps (every cut
    # splits the turn: at an assistant message).
    for turns, steps, budgets in ((6, 1, range(150, 1800, 300)), (1, 8, range(150, 2400, 250))):
        for reversed_results in (False, True):
            for keep in budgets:
                sid += 1
                add_session(db, sid, interleaved_session(turns, steps, reversed_results))
                sessions[sid] = keep
    cuts = set()
    for sid, keep in sessions.items():
        settings = [*WINDOW, "--keep-recent-tokens", str(keep)]
        before = store.restored_context(sid).to_openai()
        chat_ordered(before)
        dry = cli("--db", db.url, "compact", str(sid), "--dry-run", "--json", "--force", *settings)
        assert dry.exit_code == 0, dry.output
        done = cli("--db", db.url, "compact", str(sid), "--json", "--force", *settings)
        assert done.exit_code == 0, done.output
        out = json.loads(done.stdout)
        assert out["status"] == "compacted", out
        [checkpoint] = store.compactions(sid)
        assert json.loads(dry.stdout)["first_kept_message_id"] == checkpoint.first_kept_message_id
        messages = store.messages(sid)
        planned = [plan_message(m) for m in messages]
        at = next(i for i, m in enumerate(messages) if m.id == checkpoint.first_kept_message_id)
        assert safe_cuts(planned)[at], (sid, keep, _place(messages, at))
        cuts.add(_place(messages, at))
        ctx = store.restored_context(sid)
        assert ctx.messages[0].role in ("user", "assistant") and not ctx.messages[0].tool_call_id
        sent = ctx.to_openai()
        chat_ordered(sent)
        kept_calls = {c["id"] for m in sent for c in m.get("tool_calls") or ()}
        kept_results = [m["tool_call_id"] for m in sent if m["role"] == "tool"]
        assert sorted(kept_results) == sorted(kept_calls)  # no synthetic result, no orphan
        shown = cli("--db", db.url, "context", "show", str(sid), "--json")
        assert shown.exit_code == 0, shown.output
        view = json.loads(shown.stdout)
        assert view["synthetic_results"] == 0
        chat_ordered([m for m in view["messages"] if m["kind"] != "summary"])
        exported = cli("--db", db.url, "context", "export", str(sid), "--format", "jsonl")
        assert exported.exit_code == 0, exported.output
        chat_ordered([json.loads(line) for line in exported.stdout.splitlines()])
    # The budgets moved the cut over the turns: at a request, and inside a turn at its first
    # call (a turn split), never at the second call nor at a result.
    assert cuts == {"request", "first call"}
    checked = cli("--db", db.url, "validate")
    assert checked.exit_code == 0, checked.output
    assert "0 error(s)" in checked.output
