"""Summaries built for the next step (issue #29 item 3), on plain lists: the sections of the
extractive summary, another tool's summary converted into them, and what the LLM is sent."""

from __future__ import annotations

import json
import re

import pytest

from ctxtool.compaction.fold import fold, frame_tokens
from ctxtool.compaction.summarizers import (
    ExtractiveSummarizer,
    Summary,
    SummaryRequest,
    build_prompt,
)
from ctxtool.compaction.summarizers.base import render_message
from ctxtool.compaction.summarizers.prompt import SUMMARY_FORMAT
from ctxtool.compaction.summarizers.span_notes import condensed_log
from ctxtool.core.evaluator import carry_over
from ctxtool.core.records import Message, calls_of
from ctxtool.core.sections import (
    SECTIONS,
    canonical_heading,
    is_item,
    parse_sections,
    summary_items,
)
from ctxtool.core.span_facts import signals_of
from ctxtool.core.touched_files import files_touched
from ctxtool.db import create_engine
from ctxtool.importer import Importer
from ctxtool.migrate import Migrator
from ctxtool.store import Store

from .conftest import TRANSCRIPTS

CLAUDE_CODE_SUMMARY = """This session is being continued from a previous conversation that ran out of context. The conversation is summarized below:
Analysis:
Let me chronologically analyze the conversation: the user wants X.

Summary:
1. Primary Request and Intent:
   The user invoked `/erk:plan-implement 8511` to implement plan #8511.

3. Files and Code Sections:
   - **`src/push_session.py`** (NEW)
     - Step name changed
   - **`src/fetch_sessions.py`** (NEW)
     - Step name changed
   ```python
   x = 1
   ```
   ```python
   y = 2
   ```

7. Pending Tasks:
   - [x] Phase 1: create push-session
   - Phase 2: write the tests

9. Optional Next Step:
   Run the tests.
Please continue the conversation from where we left it off without asking the user any further questions. Continue with the last task that you were asked to work on."""

PI_OLD_SUMMARY = """## Project Overview
A monorepo of coding tools.

## Original Request
Port the TUI to the theme system.

### WP14: Create main-new.ts (NEXT)
- Copy main.ts

## User Preferences
- E2E tests only
"""


def msg(i, role, content=None, **kw):
    return Message(i, 1, role, content, **kw)


def call(i, name, args, cid, content=None):
    calls = [
        {"id": cid, "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}
    ]
    return msg(i, "assistant", content, tool_calls=calls)


def result(i, cid, content, **details):
    return msg(i, "tool", content, tool_call_id=cid, details=details or None)


def summarize(messages, previous=None, files=None, **kw):
    return (
        ExtractiveSummarizer().summarize(SummaryRequest(previous, messages, files or {}, **kw)).text
    )


def section(text, heading):
    items = {s.heading: s.items for s in parse_sections(text)}.get(heading, [])
    return [i for i in items if is_item(i)]  # the notes under the summary are no items


def test_another_tools_summary_loses_its_scratchpad_and_boilerplate_and_keeps_its_fences():
    sections = parse_sections(CLAUDE_CODE_SUMMARY)
    text = "\n".join(i for s in sections for i in s.items)
    assert "chronologically" not in text and "Please continue" not in text
    assert "being continued" not in text
    files = {s.heading: s.items for s in sections}["Files and Code Sections"]
    assert files.count("  - Step name changed") == 2  # nesting kept, repeats kept
    assert "```python\nx = 1\n```" in files and "```python\ny = 2\n```" in files
    assert "```" not in summary_items(CLAUDE_CODE_SUMMARY)  # fences are no items
    assert canonical_heading("Original Request") == "Goal"
    assert canonical_heading("Project Overview") is None
    assert canonical_heading("Next Steps (WP14-WP20)") == "Next step"
    pi = {s.heading: s.items for s in parse_sections(PI_OLD_SUMMARY)}
    assert pi["Original Request"][-1] == "- Copy main.ts"  # a sub-heading stays in its section


def test_a_carried_summary_is_converted_into_our_sections():
    out = summarize(
        [msg(1, "user", "Now add a --dry-run flag to push-session.")], CLAUDE_CODE_SUMMARY
    )
    assert "Please continue" not in out and "chronologically" not in out
    assert section(out, "Goal")[0].startswith("The user invoked `/erk:plan-implement 8511`")
    assert "- [x] Phase 1: create push-session" in section(out, "Done")  # retired
    assert "- Phase 2: write the tests" in section(out, "Open tasks")
    assert out.count("```python") == 2 and out.count("Step name changed") == 2
    assert "Run the tests." in section(out, "Earlier work")  # the new request supersedes it
    assert section(out, "Latest request") == ["> Now add a --dry-run flag to push-session."]
    assert "Modified:" not in out
    pi = summarize([msg(1, "user", "yo")], PI_OLD_SUMMARY)
    assert section(pi, "Goal")[0] == "Port the TUI to the theme system."
    assert "A monorepo of coding tools." in section(pi, "Project Overview")
    assert "yo" not in section(pi, "Latest request")


def test_the_goal_is_the_command_its_arguments_and_the_plan_title():
    messages = [
        msg(
            1,
            "user",
            "<command-message>running</command-message>\n<command-name>/erk:plan-implement</command-name>\n<command-args>8511</command-args>",
        ),
        msg(2, "user", "# /erk:plan-implement\n\nImplement a plan.", details={"is_meta": True}),
        call(3, "Bash", {"command": "erk exec setup-impl --issue 8511"}, "c1"),
        result(4, "c1", '{"success": true, "plan_title": "Session Accumulation"}'),
    ]
    out = summarize(messages)
    assert section(out, "Goal") == [
        "/erk:plan-implement 8511 (Session Accumulation): Implement a plan."
    ]
    assert section(out, "Latest request") == ["> /erk:plan-implement 8511"]
    assert "Base directory" not in out  # the skill's text is context, not a request
    bare = summarize(
        [
            msg(1, "user", "<command-name>/init</command-name>"),
            msg(2, "user", "Please analyze this codebase. More text.", details={"is_meta": True}),
        ]
    )
    assert section(bare, "Goal") == ["/init: Please analyze this codebase."]


def test_the_latest_request_is_quoted_whole_and_never_cut_mid_sentence():
    colours = "Use a pastel colour scheme for the roles: user blue, assistant green, tools grey."
    long = "Rewrite the viewer. " * 30 + colours
    out = summarize([msg(1, "user", "Build the viewer."), msg(2, "user", long)])
    [quoted] = section(out, "Latest request")
    assert colours in quoted
    huge = ("Keep every line of the log. " * 80) + colours
    [cut] = section(summarize([msg(0, "user", "Build the viewer."), msg(1, "user", huge)]), "Latest request")  # fmt: skip
    assert cut.endswith("log. […]")  # whole sentences left out, none cut
    assert section(summarize([msg(1, "user", huge)]), "Next step")[0].startswith(
        "Continue the latest request: Keep every line"
    )


def test_an_earlier_request_keeps_what_its_turn_reported_by_name():
    """A Codex session whose calls are redacted: only the agent's last words of a turn say which
    file it made. They stay under the request, the lines that name something, code left out;
    a report naming nothing adds nothing."""
    report = (
        "Done.\n\nI extracted the inline `<style>` block into:\n\n"
        "- `/Users/j/viewer/viewer.css`\n\n```css\nbody { color: red }\n```\nNo JS changes."
    )
    messages = [
        msg(1, "user", "Build the viewer."),
        msg(2, "assistant", "Built it."),
        msg(3, "user", "extract css from html template"),
        msg(4, "assistant", "Extracting now."),
        msg(5, "assistant", report),
        msg(6, "user", "Now add a dark mode."),
        msg(7, "assistant", "On it."),
    ]
    earlier = section(summarize(messages), "Earlier requests")
    assert earlier == [
        "- extract css from html template",
        "  → I extracted the inline `<style>` block into:; `/Users/j/viewer/viewer.css`",
    ]


def test_what_a_sub_agent_reported_is_done_work_by_name():
    """Claude Code's Task results: the sub-agent's files and checks are only in its report
    (fe5e1c67 set its project up with create-next-app inside one). A launch notice is none."""
    report = (
        "## Summary\n\nI successfully created a new Next.js TODO app project:\n\n"
        "- Created using `npx create-next-app@latest todo-app` with TypeScript\n"
        "- Installed `lucide-react` for icons"
    )
    messages = [
        msg(1, "user", "Create a TODO app."),
        call(2, "Task", {"description": "Setup Next.js project", "prompt": "..."}, "t1"),
        result(3, "t1", report),
        call(4, "Task", {"description": "Explore", "prompt": "..."}, "t2"),
        result(5, "t2", "Async agent launched successfully. agentId: ab558b3"),
        msg(6, "assistant", "All done."),
    ]
    done = section(summarize(messages), "Done")
    assert done == [
        # whole while the budget has room, in its own order (the first line only when short)
        "- Task (Setup Next.js project): I successfully created a new Next.js TODO app "
        "project:; Created using `npx create-next-app@latest todo-app` with TypeScript; "
        "Installed `lucide-react` for icons",
        # the turn ended on the agent's closing report: it and the calls before are done work
        "> All done.",
        "- Task (Setup Next.js project) → ✓ ok",
        "- Task (Explore) → still running: Async agent launched successfully. agentId: ab558b3",
    ]


def test_open_tasks_say_what_each_task_is():
    messages = [
        msg(1, "user", "Ship the release."),
        call(2, "TaskCreate", {"subject": "Write the changelog"}, "t1"),
        result(3, "t1", "Task #7 created successfully: Write the changelog"),
        call(4, "TaskCreate", {"subject": "Tag v2.0"}, "t2"),
        result(5, "t2", "Task #8 created successfully: Tag v2.0"),
        call(6, "TaskUpdate", {"taskId": "7", "status": "completed"}, "t3"),
        call(7, "TaskUpdate", {"taskId": "8", "status": "in_progress"}, "t4"),
    ]
    out = summarize(messages)
    assert section(out, "Open tasks") == ["- [in progress] Tag v2.0"]
    assert section(out, "Done") == ["- [x] Write the changelog"]
    assert "TaskCreate x" not in out and "TaskUpdate" not in out
    assert "Tag v2.0" in section(out, "Next step")[0]
    todo = [
        call(1, "TodoWrite", {"todos": [{"content": "Port the parser", "status": "pending"}]}, "c")
    ]
    assert section(summarize(todo), "Open tasks") == ["- [ ] Port the parser"]
    plan = [call(1, "update_plan", {"plan": [{"step": "Add tests", "status": "in_progress"}]}, "c")]
    assert section(summarize(plan), "Open tasks") == ["- [in progress] Add tests"]


def test_errors_say_whether_they_were_fixed_and_a_read_is_no_error():
    messages = [
        msg(1, "user", "Fix the rounding bug."),
        call(2, "Read", {"file_path": "notes.md"}, "r1"),
        result(3, "r1", "the build failed with exit code 1 last week"),
        call(4, "Bash", {"command": "pytest tests/test_invoice.py"}, "b1"),
        result(5, "b1", "E   AssertionError: 0.1 != 0.10000001\nexit code 1"),
        call(
            6, "Edit", {"file_path": "src/invoice.py"}, "e1", "Round with Decimal instead of float."
        ),
        result(7, "e1", "ok"),
        call(8, "Bash", {"command": "pytest tests/test_invoice.py"}, "b2"),
        result(9, "b2", "3 passed\nexit code 0"),
        call(10, "Bash", {"command": "ruff check ."}, "b3"),
        result(11, "b3", "F401 unused import\nexit code 1"),
    ]
    errors = section(summarize(messages), "Errors and fixes")
    assert len(errors) == 2 and not any("notes.md" in e for e in errors)
    assert "AssertionError: 0.1 != 0.10000001" in errors[0]
    assert "fixed: a later run succeeded after changing src/invoice.py" in errors[0]
    assert errors[1].endswith("still open")
    files = section(summarize(messages), "Files changed and why")
    assert files == ["- `src/invoice.py` — Round with Decimal instead of float. (for: the goal)"]


def test_constraints_are_instructions_never_questions_and_acknowledgements_are_no_requests():
    messages = [
        msg(
            1,
            "user",
            "Rename the settings module. no deprecation alias! That is what happens if we don't stream, right?",
        ),
        msg(2, "user", "wow"),
        msg(3, "user", "stop commiting everything"),
        msg(4, "user", '{"level": "error", "msg": "boom", "ts": 1}'),
    ]
    out = summarize(messages)
    constraints = section(out, "Constraints")
    assert "- no deprecation alias!" in constraints and "- stop commiting everything" in constraints
    assert not any("right?" in c for c in constraints)
    assert section(out, "Latest request") == ["> stop commiting everything"]
    assert "wow" not in out and "boom" not in out


def test_secrets_are_never_copied():
    key = "sk-proj-" + "a1B2c3D4" * 4
    messages = [
        msg(
            1,
            "user",
            f"Deploy with OPENAI_API_KEY={key} to https://admin:hunter2@db.example.com/app and token ghp_{'x' * 36}",
        ),
    ]
    out = summarize(messages)
    assert key not in out and "hunter2" not in out and "ghp_xxx" not in out
    assert "admin:[redacted]@db.example.com" in out


# A key planted in every place a span or a previous summary can carry one.
PLANTED = "sk-proj-" + "Zq9Xw8Vu" * 4
GITHUB = "ghp_" + "a1B2c3D4e5" * 4


def planted_span():
    return [
        msg(1, "user", f"Deploy the app. The key is OPENAI_API_KEY={PLANTED}, keep it secret."),
        call(2, "Bash", {"command": f"curl -H 'Authorization: Bearer {GITHUB}' api"}, "b1"),
        result(3, "b1", f"error: 401 bad credentials for token {GITHUB}\nexit code 1"),
        call(4, "Edit", {"file_path": "deploy/env.py"}, "e1", f"Setting api_key={PLANTED} in env."),
        result(5, "e1", "ok"),
        msg(6, "assistant", f"Done: the app runs with {PLANTED}."),
    ]


def test_a_planted_key_is_never_copied_by_the_extractive_summary():
    previous = f"## Constraints\n- use the token {GITHUB} for the registry\n"
    out = summarize(planted_span(), previous=previous, max_tokens=4096)
    assert "deploy/env.py" in out and "[redacted]" in out
    assert PLANTED not in out and GITHUB not in out and "Zq9Xw8Vu" not in out


def test_a_planted_key_never_reaches_the_llm_nor_its_summary():
    """What is sent to the endpoint is masked (the request body the server received: the span
    and the previous summary), and so is what a model answers (here a key of its own)."""
    from ctxtool.compaction.summarizers import OpenAISummarizer

    from .llm_server import FakeLLM

    previous = f"## Constraints\n- use the token {GITHUB} for the registry\n"
    with FakeLLM() as llm:
        llm.summary_text = lambda body: body["messages"][1]["content"] + f"\nkey {PLANTED}"
        summarizer = OpenAISummarizer("m", llm.base_url, "k", timeout=10, max_retries=0)
        out = summarizer.summarize(SummaryRequest(previous, planted_span(), {}))
        sent = json.dumps(llm.requests[0])
    assert "[User]: Deploy the app" in sent and "deploy/env.py" in sent and "[redacted]" in sent
    assert "use the token [redacted] for the registry" in sent
    assert PLANTED not in sent and "Zq9Xw8Vu" not in sent and GITHUB not in sent
    assert "Deploy the app" in out.text and out.text.endswith("key [redacted]")


def test_the_llm_sees_the_head_and_tail_of_long_results_and_injections_as_context():
    run = "collected 900 items\n" + "." * 5000 + "\nFAILED tests/test_x.py::test_y - KeyError: 'id'"
    text = render_message(result(1, "c", run))
    assert text.startswith("[Tool result]: collected 900 items") and "KeyError: 'id'" in text
    assert "characters left out" in text and len(text) < 2200
    skill = render_message(
        msg(2, "user", "Base directory for this skill: x", details={"is_meta": True})
    )
    assert skill.startswith("[Context injected by the runtime") and "[User]" not in skill
    reminder = render_message(msg(3, "user", "Fix it <system-reminder>be terse</system-reminder>"))
    assert reminder == "[User]: Fix it"
    command = render_message(
        msg(4, "user", "<command-name>/plan</command-name><command-args>42</command-args>")
    )
    assert command == "[User command]: /plan 42"


def test_the_prompt_has_a_place_for_every_section_the_focus_and_the_split_turn():
    messages = [
        msg(1, "user", "Old request."),
        msg(2, "assistant", "Done."),
        msg(3, "user", "Turn request."),
        msg(4, "assistant", "Working on it."),
    ]
    prompt = build_prompt(
        SummaryRequest(None, messages, {}, split_turn=True, instructions="the database migration")
    )
    for heading in (
        "## Goal",
        "## Latest request",
        "## Open tasks",
        "## Current work",
        "## Errors and fixes",
        "## Files changed and why",
        "## Constraints",
        "## Decisions",
        "## Earlier requests",
        "## Next step",
        "## Turn in progress",
    ):
        assert heading in prompt, heading
    conversation, prefix = prompt.split("</turn-prefix>")[0].split("<turn-prefix>\n")
    assert "Old request." in conversation and "Turn request." not in conversation
    assert "Turn request." in prefix
    assert "<focus>\nthe database migration\n</focus>" in prompt
    plain = build_prompt(SummaryRequest(None, messages, {}))
    assert "<turn-prefix>" not in plain and "<focus>" not in plain


def test_the_headings_the_llm_is_asked_for_are_ctxtool_s_sections():
    """The prompt writes its format out; each heading in it is one of ``sections``' own, so a
    summary the LLM wrote is read back section by section (its Errors' still-open failures
    retired, its Done kept) when the next checkpoint converts it."""
    asked = re.findall(r"^## (.+)$", SUMMARY_FORMAT, re.M)
    assert asked and all(canonical_heading(h) == h and h in SECTIONS for h in asked), asked
    assert [h for h in SECTIONS if h in asked] == asked  # in the order the agent reads them


def test_a_turn_a_slash_command_started_is_split_at_the_command():
    """The split turn's request is the command the user typed after an earlier request, not
    the earlier request, nor the expansion a runtime stored after the command; the extractive
    summary states it as the request whose work continues after the cut."""
    command = "<command-name>/erk:plan-implement</command-name><command-args>8511</command-args>"
    messages = [
        msg(1, "user", "Rename the helper in utils.py."),
        msg(2, "assistant", "Renamed."),
        msg(3, "user", command),
        msg(4, "user", "Base directory for this skill: /x\n# Implement a plan"),
        msg(5, "assistant", "Reading the plan."),
    ]
    prompt = build_prompt(SummaryRequest(None, messages, {}, split_turn=True))
    conversation, prefix = prompt.split("</turn-prefix>")[0].split("<turn-prefix>\n")
    assert "Rename the helper" in conversation and "/erk:plan-implement 8511" not in conversation
    assert prefix.startswith("[User command]: /erk:plan-implement 8511")
    text = ExtractiveSummarizer().summarize(SummaryRequest(None, messages[2:], {}, True)).text
    [latest] = [s for s in parse_sections(text) if s.heading == "Latest request"]
    [goal] = [s for s in parse_sections(text) if s.heading == "Goal"]
    # the command is the span's one request: the goal, said once (the latest request points there)
    assert goal.items[0] == "/erk:plan-implement 8511"
    assert latest.items[0] == "(the goal's request, quoted above)"
    assert "continues in the messages after this summary" in latest.items[1]


def test_a_folded_split_turn_keeps_its_prefix_apart():
    messages = [
        msg(i, "user" if i in (1, 40) else "assistant", f"message {i} " + "word " * 60)
        for i in range(1, 60)
    ]
    seen: list[SummaryRequest] = []

    def summarizer(request):
        seen.append(request)
        return Summary("## Goal\nshort", "fake")

    request = SummaryRequest(None, messages, {}, split_turn=True, max_tokens=1000)
    # room for about 38 of the 59 messages a chunk: the request (40) falls in the last one
    fold(summarizer, request, input_tokens=frame_tokens(request) + 1000 + 200 + 2600)
    assert len(seen) == 2
    last = seen[-1]
    assert last.split_turn and "message 40 " in (last.turn_prefix or "")
    assert all(not r.split_turn for r in seen[:-1])
    assert "message 40 " not in (last.transcript or "")


# -- the real transcripts -----------------------------------------------------------------------

BOILERPLATE_PHRASES = (
    "Please continue the conversation",
    "This session is being continued",
    "<command-name>",
    "<command-message>",
    "<system-reminder>",
    "# AGENTS.md instructions",
    "<analysis>",
    "Caveat: ",
    "<environment_context>",
)


@pytest.fixture(scope="module")
def real_sessions(tmp_path_factory):
    """Every shared transcript imported into a throw-away SQLite store: (file name, messages,
    its imported checkpoints)."""
    engine = create_engine(f"sqlite:///{tmp_path_factory.mktemp('real') / 'ctx.db'}")
    Migrator(engine).up()
    files = sorted(p for p in TRANSCRIPTS.rglob("*") if p.suffix in (".jsonl", ".traj", ".json"))
    store = Store(engine)
    out = []
    for path, imported in zip(files, Importer(engine).import_paths([str(p) for p in files])):
        assert imported.session_id is not None, (path.name, imported.error)
        sid = imported.session_id
        out.append((path.name, store.messages(sid), store.compactions(sid)))
    engine.dispose()
    assert len(out) >= 12
    return out


def _summaries(messages, checkpoints):
    """The extractive summary of the whole session, and one on top of each imported checkpoint
    of the messages after its cut."""
    read, modified = files_touched(calls_of(messages))
    files = {"read_files": read, "modified_files": modified}
    yield None, summarize(messages, files=files, min_carry_over=0.9)
    for cp in checkpoints:
        after = [m for m in messages if m.id >= cp.first_kept_message_id]
        yield cp.summary, summarize(after, cp.summary, files=files, min_carry_over=0.9)


def test_real_transcripts_give_a_goal_and_no_boilerplate(real_sessions):
    for name, messages, checkpoints in real_sessions:
        for previous, out in _summaries(messages, checkpoints):
            [goal] = [s.items[0] for s in parse_sections(out) if s.heading == "Goal"]
            # the curated fixtures' texts are "[trimmed for fixture]": no goal to state there
            assert goal != "(not stated)" or "[trimmed" in (previous or ""), name
            for phrase in BOILERPLATE_PHRASES:
                assert phrase not in out, (name, phrase)
            assert not re.search(r"\b(TaskCreate|TaskUpdate|TodoWrite|update_plan) x\d", out), name
            assert "Modified: (none)" not in out
            if previous:
                assert carry_over(previous, out).share >= 0.9, name


def test_the_skill_driven_session_states_its_command_plan_and_tasks(real_sessions):
    [(_, messages, [checkpoint])] = [s for s in real_sessions if s[0].startswith("a5c478e1")]
    before = [m for m in messages if m.id < checkpoint.first_kept_message_id]
    out = summarize(before)
    [goal] = section(out, "Goal")
    assert "/erk:plan-implement 8511" in goal
    assert "Session Accumulation for Cross-Machine Learning" in goal
    # the list's last update left Phase 10 in progress; `erk pr submit` ran after it
    assert section(out, "Open tasks") == []
    assert "- [x] Phase 9: Run CI and fix issues" in section(out, "Done")
    assert "- [x] Phase 10: Submit PR" in section(out, "Done")
    assert any("push_session.py" in f for f in section(out, "Files changed and why"))
    # on top of Claude Code's own summary of that span: its sections, not its scratchpad
    after = [m for m in messages if m.id >= checkpoint.first_kept_message_id]
    carried = summarize(after, checkpoint.summary)
    assert section(carried, "Goal")[0].startswith("The user invoked `/erk:plan-implement 8511`")
    assert "Let me chronologically analyze" not in carried
    assert any(
        "Formatting issue in `push_session.py`" in e for e in section(carried, "Errors and fixes")
    )


def test_the_operator_s_focus_reaches_the_llm_through_the_settings():
    from ctxtool.compaction.summarizers import SummarizerSettings, make_summarizer

    from .llm_server import FakeLLM, faithful_summary

    messages = [msg(1, "user", "Migrate the billing tables."), msg(2, "assistant", "On it.")]
    with FakeLLM() as llm:
        settings = SummarizerSettings(
            kind="openai", base_url=llm.base_url, model="m", retries=0, instructions="the schema"
        )
        out = make_summarizer(settings).summarize(SummaryRequest(None, messages, {}))
        prompt = llm.requests[0]["messages"][1]["content"]
    assert out.text == faithful_summary(llm.requests[0])
    assert (
        "<focus>\nthe schema\n</focus>" in prompt
        and "[User]: Migrate the billing tables." in prompt
    )


def test_the_condensed_log_keeps_each_older_turn_with_its_calls_and_outcomes():
    messages = [
        msg(1, "user", "Fix the parser. It drops the last line."),
        call(
            2, "Bash", {"command": "pytest tests/test_parser.py"}, "b1", "Running the tests first."
        ),
        result(3, "b1", "E   AssertionError\nexit code 1"),
        call(4, "Edit", {"file_path": "src/parser.py"}, "e1", "The loop stops one short."),
        result(5, "e1", "ok"),
        msg(6, "user", "Now document it."),
        msg(7, "assistant", "Writing the docs."),
    ]
    [turn] = condensed_log(messages)  # the last turn is the current work, not the log
    assert turn.splitlines() == [
        "- asked: Fix the parser. It drops the last line.",
        "  - said: Running the tests first. / The loop stops one short.",
        "  - did: Bash `pytest tests/test_parser.py` ✗; Edit src/parser.py ✓",
    ]
    out = ExtractiveSummarizer(condensed_log=True).summarize(SummaryRequest(None, messages, {}))
    assert turn in out.text and "## Log of earlier turns" in out.text
    assert "## Log of earlier turns" not in summarize(messages)  # measured: off by default


def test_current_work_reads_a_call_as_the_signals_do():
    """One reading of a call for the summary and the evaluator: a path under any key the
    signals know (``target_file``, ``filePath``), and a poll of a running command (Codex's
    ``write_stdin``) or a task-list read is bookkeeping, never the work. The summary's copy
    knew three path keys and four task tools, and listed the poll as the last thing done."""
    messages = [
        msg(1, "user", "Fix the build."),
        call(2, "read_file", {"target_file": "src/app.ts"}, "r1", "Reading the entry point."),
        result(3, "r1", "export {}"),
        call(4, "edit", {"filePath": "src/build.ts"}, "e1"),
        result(5, "e1", "ok"),
        call(6, "exec_command", {"cmd": ["npm", "run", "build"]}, "x1"),
        result(7, "x1", "Process running with session ID 3"),
        call(8, "write_stdin", {"session_id": 3, "chars": ""}, "p1"),
        result(9, "p1", "built in 2.1s"),
        call(10, "TaskList", {}, "t1", "The build passes."),
        result(11, "t1", "#1 Fix the build [completed]"),
    ]
    work = section(summarize(messages), "Current work")
    assert work[-3:] == [
        "- read_file src/app.ts → ok",
        "- edit src/build.ts → ✓ ok",
        "- exec_command `npm run build` → still running: Process running with session ID 3",
    ]
    [turn] = condensed_log(messages + [msg(12, "user", "Thanks, now the docs.")])
    assert "read_file src/app.ts ✓; edit src/build.ts ✓; exec_command `npm run build` ✓" in turn
    assert "write_stdin" not in turn and "TaskList" not in turn


def test_what_the_agent_made_of_a_failure_is_found_as_the_evaluator_finds_it():
    """The summary and the evaluator's reference answer read the agent's reaction to a
    failure in one window (signals.reaction_after): here it comes six messages on, after the
    reads it made first; the summary's own copy looked five messages on and missed it."""
    reads = [
        {"id": f"r{n}", "type": "function", "function": {"name": "Read", "arguments": "{}"}}
        for n in (1, 2)
    ]
    messages = [
        msg(1, "user", "Install the dependencies."),
        call(2, "Bash", {"command": "npm ci"}, "b1"),
        result(3, "b1", "npm error code EUSAGE: lockfile out of sync\nexit code 1"),
        msg(4, "assistant", None, tool_calls=reads),
        result(5, "r1", "{}"),
        result(6, "r2", "{}"),
        call(7, "Read", {"file_path": "package-lock.json"}, "r3"),
        result(8, "r3", "{}"),
        msg(9, "assistant", "The lockfile is stale; regenerating it with npm install."),
    ]
    [failure] = signals_of(messages).failures
    assert failure.then == "The lockfile is stale; regenerating it with npm install."
    [error] = section(summarize(messages), "Errors and fixes")
    assert f"(then: {failure.then})" in error


def test_an_error_the_user_pasted_is_an_error_with_what_the_agent_made_of_it():
    pasted = "it crashed:\nError: Invalid hex color: #000cc\n    at hexToRgb (theme.ts:12)"
    messages = [
        msg(1, "user", pasted),
        msg(
            2,
            "assistant",
            "The theme file has a five-digit colour. I will fall back to the dark theme.",
        ),
    ]
    [error] = section(summarize(messages), "Errors and fixes")
    assert error.startswith("- the user reported: Error: Invalid hex color: #000cc")
    assert "fall back to the dark theme" in error


def test_current_work_keeps_the_last_call_when_the_latest_turn_made_none():
    """The agent ran a command, then answered two questions without a call: the current work
    still says that command, whole, as coming before the latest request (it is where the work
    stood at the cut), and it survives a budget that trims the rest."""
    path = "/home/da/.claude/projects/-home-da-akerud-random/" + "a263b894-c8c2" * 6 + ".jsonl"
    messages = [
        msg(1, "user", "Where is the session file?"),
        call(2, "Bash", {"command": f"wc -l {path}"}, "b1", "Checking its size."),
        result(3, "b1", f"91 {path}"),
        msg(4, "assistant", f"It is `{path}`, 91 lines."),
        msg(5, "user", "Can you commit everything?"),
        msg(6, "assistant", "All committed. You're ready to push to GitHub."),
    ]
    # the turn ended on the agent's words: that command is done work, said whole
    work = section(summarize(messages), "Done")
    assert work[-1] == f"- (before the latest request) Bash `wc -l {path}` → ok: 91 {path}"
    earlier = [msg(n - 100, "user", f"Request {n}: " + "word " * 60) for n in range(40)]
    request = SummaryRequest(None, earlier + messages, {}, max_tokens=700)
    text = ExtractiveSummarizer().summarize(request).text
    assert "older items trimmed" in text and "clipped" not in text
    assert any(f"wc -l {path}" in line for line in section(text, "Done"))


def test_the_agent_s_closing_report_is_done_work_not_current_work():
    """The agent's last words report the request finished ("Updated … Changes made: …"): the
    quote is done work; under Current work it read as work still pending."""
    messages = [
        msg(1, "user", "Remove the sanitization from the viewer."),
        call(2, "Bash", {"command": "node --check viewer.js"}, "b1"),
        result(3, "b1", ""),
        msg(4, "assistant", "Updated only viewer.js.\nChanges made:\n- Removed `sanitizeHtml`."),
    ]
    text = summarize(messages)
    assert any("sanitizeHtml" in line for line in section(text, "Done"))
    assert not any("sanitizeHtml" in line for line in section(text, "Current work"))
    # the turn ended on that report: its calls are done work as well
    assert any("node --check viewer.js" in line for line in section(text, "Done"))


def test_a_trimmed_quote_of_the_last_words_leaves_its_gist():
    from ctxtool.compaction.summarizers.span_notes import quote_gist

    quote = (
        "> Done! Here is what changed:\n> 1. **Updated HEARTBEAT.md** with the task\n"
        "> 2. Created `scripts/daily-git-backup.ps1` and ran it. Pushed."
    )
    assert quote_gist(quote) == ("> Done! (names: `HEARTBEAT.md`, `scripts/daily-git-backup.ps1`)")
    assert quote_gist("> Nothing named here at all.") == "> Nothing named here at all."


def test_carry_over_reads_an_item_whatever_its_emphasis_and_punctuation():
    """A carried quote ("**Phase 1 complete**: … web search.") kept word for word is held:
    the item was compared without its emphasis against a summary with it, and "search." was
    a distinctive word the summary never held."""
    previous = "## Current work\n> **Phase 1 complete**: moving to **Phase 2 — Web search**."
    again = "## Earlier work\n> **Phase 1 complete**: moving to **Phase 2 — Web search**."
    assert carry_over(previous, again).share == 1.0
    assert carry_over(previous, "## Earlier work\n> Phase 3 started.").share == 0.0


def test_current_work_says_what_a_sub_agent_was_sent_to_do():
    messages = [
        msg(1, "user", "Build the app."),
        call(2, "Task", {"description": "Set up the Next.js project", "prompt": "..."}, "t1"),
        result(3, "t1", "Created todo-app/ with create-next-app."),
    ]
    work = section(summarize(messages), "Current work")
    assert work == [
        "- Task (Set up the Next.js project) → ✓ ok: Created todo-app/ with create-next-app."
    ]


def test_a_second_checkpoint_states_its_own_new_failures_before_the_carried_ones():
    """Issue #29: the carried Errors list came back word for word and the span's new failures
    were trimmed; now they come first, carried ones after, those a later run fixed retired."""
    carried = [
        f"- `npm run check{n}` failed: error TS23{n}0: Type '{{ description: ChalkInstance }}' is"
        f" missing properties selectedPrefix, selectedText, scrollInfo in test/chat-{n}.ts"
        " (then: The errors are in the TUI test files, not in coding-agent itself.) — still open"
        for n in range(1, 8)
    ]
    previous = "\n".join(
        ["## Goal", "Port the selectors to the theme system.", "", "## Errors and fixes"]
        + carried
        + ["", "## Decisions"]
        + [f"- keep the {n}th selector's layout exactly as it was before" for n in range(30)]
    )
    messages = [
        msg(1, "user", "Release v0.8.0 and publish it."),
        call(2, "bash", {"command": 'git commit -m "Release v0.8.0"'}, "b1"),
        result(3, "b1", "husky - pre-commit\nerror TS2345: in test-theme-colors.ts\nexit code 1"),
        call(4, "bash", {"command": "npm run publish"}, "b2"),
        result(5, "b2", "src/theme.ts(3,1): error TS2305: no exported member\nexit code 2"),
        call(6, "bash", {"command": "npm run check1"}, "b3"),
        result(7, "b3", "all good\nexit code 0"),
        msg(8, "assistant", "The publish failed; I will fix theme.ts next."),
    ]
    out = summarize(messages, previous, max_tokens=1250, min_carry_over=0.9)
    errors = section(out, "Errors and fixes")
    assert (
        errors[0].startswith('- `git commit -m "Release v0.8.0"` failed') and "TS2345" in errors[0]
    )
    assert errors[1].startswith("- `npm run publish` failed") and "TS2305" in errors[1]
    assert all("npm run check1`" not in e for e in errors)  # a later run fixed it: retired
    assert any("npm run check1`" in d and "fixed" in d for d in section(out, "Done"))
    assert any("npm run check7`" in e for e in errors[2:])  # still open: carried after
    assert carry_over(previous, out).share >= 0.9


def test_the_summary_and_the_gate_share_one_reading_of_scratchpads_and_notes():
    """Issue #29: one pattern for both; a <thinking> scratchpad and a note with a thousands
    separator were items to one of them before."""
    summary = (
        "<thinking>Let me weigh the options first.</thinking>\n## Goal\nShip the release.\n"
        "## Open tasks\n(not stated)\n\n(1,234 messages summarized extractively; no LLM was used)"
    )
    assert summary_items(summary) == ["Ship the release."]
    assert carry_over(summary, "## Goal\nShip the release.").share == 1.0


@pytest.mark.parametrize(
    "request_text,goal",
    [
        (
            "## Research Plan\n**Question**: when should SaaS be built with sqlite?",
            "Research Plan **Question**: when should SaaS be built with sqlite?",
        ),
        ("Fix the login:", '"Fix the login:"'),
    ],
)
def test_a_request_that_reads_as_a_heading_stays_the_goal_s_item(request_text, goal):
    """paradocs-session.jsonl (Pi) opens each request with "## Research Plan", then the
    question: written as the Goal's first line, the request started a section of its own and
    left the Goal without an item (the IndexError of the test above)."""
    out = summarize([msg(1, "user", request_text), msg(2, "assistant", "On it.")])
    assert section(out, "Goal") == [goal]
    assert "Research Plan" not in [s.heading for s in parse_sections(out)]
