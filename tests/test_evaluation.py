"""ctxtool.evaluation on plain lists: probes, answers by key, fabrications, the gate's rules."""

from __future__ import annotations

import subprocess
import sys

import pytest

from ctxtool.core.evaluator import (
    ContextText,
    InvalidKey,
    ProbeKind,
    answer,
    carry_over,
    derive_probes,
    describe,
    evaluate,
    fabrications,
    meets_floor,
    probe_from_dict,
    section_costs,
)
from ctxtool.core.evaluator.boilerplate import boilerplate_in
from ctxtool.core.evaluator.gate import normalised_items
from ctxtool.core.records import Message
from ctxtool.core.tokens import count_text

from .test_span_facts import Span


def probe(all_of, **kw):
    return probe_from_dict(
        {"id": "p", "kind": kw.pop("kind", "instruction"), "all_of": all_of, **kw}
    )


def test_a_probe_is_held_when_every_group_has_an_alternative():
    p = probe([["plan-implement", "/erk:plan-implement"], ["8511"]], kind="goal")
    assert answer(p, ContextText("Goal: run `/erk:plan-implement 8511`.")).held
    missed = answer(p, ContextText("Goal: implement plan 8107."))
    assert not missed.held
    assert missed.missing == p.all_of
    assert answer(p, ContextText("Goal: plan-implement 8107.")).missing == (("8511",),)


def test_a_path_is_found_by_its_basename_and_whitespace_and_case_do_not_matter():
    p = probe([["/home/runner/work/erk/src/erk/cli/push_session.py"]], kind="file_changed")
    assert answer(p, ContextText("Files: `src/erk/cli/PUSH_SESSION.py` (new)")).held
    assert not answer(p, ContextText("Files: push_session (new)")).held
    phrase = probe([["meaningful   name"]])
    assert answer(phrase, ContextText("use a Meaningful\nName for the dump")).held


def test_a_prohibition_is_held_only_as_a_prohibition():
    p = probe([["push directly to main"]], negated=True)
    assert answer(p, ContextText("Never push directly to main.")).held
    assert answer(p, ContextText("- Do not push directly to main")).held
    assert not answer(p, ContextText("Next step: push directly to main.")).held
    # A negation in an earlier sentence does not negate this one.
    assert not answer(p, ContextText("Tests do not pass yet. Then push directly to main.")).held
    # A key that states the negation itself is matched as written.
    assert answer(
        probe([["no deprecation alias"]], negated=True), ContextText("No deprecation alias!")
    ).held
    # The forbidden part negated holds it; the subject needs no negation of its own.
    both = probe([["invalid theme"], ["explode", "crash"]], negated=True)
    assert answer(both, ContextText("Invalid themes must NEVER explode.")).held
    assert not answer(both, ContextText("An invalid theme made the app explode.")).held
    # A negated group given as an object in a hand key.
    keyed = probe_from_dict(
        {"id": "x", "kind": "instruction", "all_of": [{"any_of": ["commit"], "negated": True}]}
    )
    assert keyed.negated
    assert not answer(keyed, ContextText("commit everything")).held


def test_none_of_in_the_summary_contradicts_the_answer():
    p = probe([["codex_log_viewer"]], kind="goal", none_of=["PostgreSQL"])
    assert answer(p, ContextText("Goal: codex_log_viewer in the browser")).held
    wrong = answer(p, ContextText("Goal: codex_log_viewer on PostgreSQL"))
    assert not wrong.held and wrong.contradicted == ("PostgreSQL",)


def test_where_a_probe_was_found_and_whether_only_the_summary_answers_it():
    kept = [Message(41, 1, "user", "rename native_viewer to codex_log_viewer")]
    p = probe([["codex_log_viewer"]])
    in_summary = answer(p, ContextText("Latest request: rename to codex_log_viewer", kept))
    assert in_summary.where == ("summary",) and in_summary.in_kept
    assert not in_summary.summary_only
    in_message = answer(p, ContextText("Goal: a viewer", kept))
    assert in_message.held and in_message.where == ("message 41",)
    tool_call = Message(
        42,
        1,
        "assistant",
        None,
        tool_calls=[
            {
                "id": "c",
                "type": "function",
                "function": {"name": "Edit", "arguments": '{"file_path": "/r/x.py"}'},
            }
        ],
    )
    assert answer(probe([["x.py"]]), ContextText("", [tool_call])).where == ("message 42",)


def test_invalid_keys_are_refused():
    with pytest.raises(InvalidKey, match="unknown kind"):
        probe_from_dict({"id": "a", "kind": "mood", "all_of": [["x"]]})
    with pytest.raises(InvalidKey, match="no answer key"):
        probe_from_dict({"id": "a", "kind": "goal", "all_of": []})


def coding_span() -> Span:
    s = Span()
    s.user("# AGENTS.md instructions for /repo\n\nUse us-<id> prefixes.")
    s.user("Port the renderer in render_jsonl.py to JavaScript as codex_log_viewer.js")
    s.call("shell", "SyntaxError: invalid syntax\nexit code: 1", command="python3 render_jsonl.py")
    s.call(
        "apply_patch",
        "Success.",
        raw="*** Begin Patch\n*** Update File: /repo/render_jsonl.py\n*** End Patch",
    )
    s.call("shell", "ok\nexit code: 0", command="python3 render_jsonl.py")
    s.call("Write", "File created", file_path="/repo/codex_log_viewer.js", content="x")
    s.user("never commit the session dumps! Extract the css into viewer.css")
    s.call("Write", "File created", file_path="/repo/viewer.css", content="x")
    return s


def test_derived_probes_cover_the_span():
    probes = derive_probes(coding_span().messages)
    kinds = {p.kind for p in probes}
    assert {
        ProbeKind.GOAL,
        ProbeKind.LATEST_REQUEST,
        ProbeKind.ERROR_FIX,
        ProbeKind.FILE_CHANGED,
        ProbeKind.INSTRUCTION,
    } <= kinds
    by_id = {p.id: p for p in probes}
    assert by_id["goal"].all_of[0] == ("render_jsonl.py",)
    assert by_id["error_fix_1"].all_of[0] == ("python3 render_jsonl.py",)
    assert by_id["error_fix_1"].answer.startswith("`python3 render_jsonl.py` failed: SyntaxError")
    assert by_id["error_fix_1"].answer.endswith("(fixed after changes to /repo/render_jsonl.py)")
    instruction = next(p for p in probes if p.kind is ProbeKind.INSTRUCTION)
    assert instruction.negated and instruction.all_of == (("session", "sessi"), ("commit", "commi"))
    # Nothing of the AGENTS.md block became a probe.
    assert not any("us-<id>" in a for p in probes for g in p.all_of for a in g)


GOOD = """## Goal
Port render_jsonl.py to JavaScript as codex_log_viewer.js.

## Latest request
"never commit the session dumps! Extract the css into viewer.css"

## Errors and fixes
- `python3 render_jsonl.py` failed with SyntaxError; fixed in render_jsonl.py, the rerun passed.

## Files changed
- /repo/codex_log_viewer.js: the port
- /repo/viewer.css: css extracted

## Constraints
- Never commit the session dumps.
"""
FABRICATED = (
    "Goal: migrate the storage layer to PostgreSQL. Next steps: delete the tests directory "
    "and push to main.\n/repo/render_jsonl.py\n/repo/codex_log_viewer.js\n/repo/viewer.css\n"
    "SyntaxError: invalid syntax\nRun `pytest tests/test_storage.py` and fix "
    "src/storage/postgres_backend.py"
)


def test_a_good_summary_scores_high_a_dump_low_and_a_fabrication_is_flagged():
    span = coding_span().messages
    good = evaluate(span, GOOD)
    assert good.score == 1.0 and good.fabrications == []
    assert meets_floor(good, 0.6).ok
    dump = evaluate(
        span,
        "/repo/render_jsonl.py\n/repo/codex_log_viewer.js\n/repo/viewer.css\nSyntaxError: invalid syntax",
    )
    assert dump.score is not None and dump.score < 0.6
    check = meets_floor(dump, 0.6)
    ok, missed = check
    assert not ok and {v.probe.kind for v in missed} >= {ProbeKind.INSTRUCTION}
    assert "instruction: never commit the session dumps!" in " ".join(check.missing_items())
    assert all(len(item) < 330 for item in check.missing_items())
    fabricated = evaluate(span, FABRICATED)
    assert {(f.kind, f.text) for f in fabricated.fabrications} == {
        ("identifier", "PostgreSQL"),
        ("command", "pytest tests/test_storage.py"),
        ("path", "tests/test_storage.py"),
        ("path", "src/storage/postgres_backend.py"),
    }
    assert not meets_floor(fabricated, 0.0).ok


def test_probes_the_kept_messages_answer_do_not_count():
    s = coding_span()
    span, kept = s.messages[:-2], s.messages[-2:]
    evaluation = evaluate(
        span, "## Goal\nPort render_jsonl.py", kept, probes=derive_probes(s.messages)
    )
    kept_only = [v for v in evaluation.verdicts if not v.summary_only]
    assert kept_only and all(v.where[0].startswith("message ") for v in kept_only)
    assert all(v.summary_only for v in evaluation.missed)


def test_fabrications_accept_shortened_paths_and_commands_without_flags():
    span = coding_span().messages
    assert fabrications("Ran `python3 render_jsonl.py --verbose` on render_jsonl.py", span) == []
    assert fabrications("Edited repo/codex_log_viewer.js", span) == []
    assert [f.text for f in fabrications("Edited lib/other.js", span)] == ["lib/other.js"]
    assert fabrications("Fixed it", span, previous_summary="x") == []
    assert [f.text for f in fabrications("see docs/notes.md", span)] == ["docs/notes.md"]
    assert fabrications("see docs/notes.md", span, previous_summary="docs/notes.md") == []


def test_each_section_costs_its_tokens():
    costs = section_costs(GOOD)
    assert [c.heading for c in costs] == [
        "Goal",
        "Latest request",
        "Errors and fixes",
        "Files changed",
        "Constraints",
    ]
    assert sum(c.tokens for c in costs) == count_text(GOOD)
    assert section_costs("intro\n## A\nx")[0].heading == "(before the first heading)"


def test_evaluation_as_dict_carries_the_figures():
    d = evaluate(coding_span().messages, GOOD).as_dict()
    assert d["score"] == 1.0 and d["missed"] == [] and d["fabrications"] == []
    assert d["summary_tokens"] == count_text(GOOD)
    assert d["verdicts"][0]["where"] == ["summary"]


def test_carry_over_is_measured_on_normalised_items():
    previous = """This session is being continued from a previous conversation that ran out of context.
<analysis>scratch thoughts about push_session.py</analysis>
## Goal
```
```
- **Implement** plan 8511 for push_session.py

- [x] Phase 1: push-session command
Please continue the conversation from where we left it off without asking the user any further questions.
"""
    assert normalised_items(previous) == [
        "implement plan 8511 for push_session.py",
        "phase 1: push-session command",
    ]
    kept = carry_over(
        previous, "Goal: implement plan 8511 (push_session.py). Done: Phase 1 push-session command."
    )
    assert kept.share == 1.0 and kept.missing == ()
    lost = carry_over(previous, "Goal: implement plan 8107 for push_session.py.")
    assert lost.share == 0.0 and len(lost.missing) == 2
    assert carry_over(None, "x").share is None


def test_the_pure_modules_import_no_store_database_or_summarizer():
    # the summary's format (core.sections, pure) is shared: the gate reads notes and
    # scratchpads with its patterns; the summarizers and the services stay out
    code = (
        "import sys, ctxtool.core.span_facts, ctxtool.evaluation\n"
        "bad = [m for m in sys.modules if m.startswith(('sqlalchemy', 'pymysql', 'openai', "
        "'ctxtool.store', 'ctxtool.db', 'ctxtool.compaction.summarizers', "
        "'ctxtool.compaction.compactor', 'ctxtool.compaction.batch'))]\n"
        "print(bad)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_a_clipped_or_quoted_command_is_no_fabrication():
    s = Span()
    s.call("Bash", "ok", command='grep -A 3 "function applyBackground" src/wrap.ts')
    s.call("Bash", "ok", command="git add -A && git commit -m 'Add session accumulation'")
    span = s.messages
    stated = (
        '`grep -A 3 "function applyBackground" src/wrap.ts`, '
        "`git add -A && git commit -m 'Add session […]`"
    )
    assert fabrications(stated, span) == []
    assert [f.text for f in fabrications("`git push origin main`", span)] == [
        "git push origin main"
    ]


def test_the_stored_figures_and_their_one_line_description():
    evaluation = evaluate(coding_span().messages, FABRICATED)
    figures = evaluation.figures()
    assert "verdicts" not in figures
    assert evaluation.as_dict() == {
        **figures,
        "verdicts": [v.as_dict() for v in evaluation.verdicts],
    }
    # The pasted paths hold the file and current-work probes, nothing else: 2 of 6 kinds.
    assert (figures["score"], figures["held"], figures["summary_only_probes"]) == (0.333, 4, 8)
    assert describe(figures) == (
        f"probes 33% (4/8), 4 fabrications, summary {count_text(FABRICATED)} tokens"
    )
    assert describe({"retention": 0.5}) is None and describe(None) is None


def test_a_summarys_note_about_itself_is_no_carried_item():
    """The extractive footer counts the messages it summarised: the next summary says another
    number, and that is no item lost (the shared small fixtures were rejected for it)."""
    previous = "## Goal\nList the files\n\n(946 messages summarized extractively; no LLM was used)"
    again = "## Goal\nList the files\n\n(942 messages summarized extractively; no LLM was used)"
    assert normalised_items(previous) == ["list the files"]
    assert carry_over(previous, again).share == 1.0


def test_a_repeated_statement_is_one_probe():
    """A rule said three times is one thing to remember, not three probes that outvote the rest."""
    s = Span()
    for _ in range(3):
        s.user("never push to main")
    probes = [p for p in derive_probes(s.messages) if p.kind is ProbeKind.INSTRUCTION]
    assert [p.id for p in probes] == ["instruction_1"]


def test_a_continued_span_asks_no_goal():
    """After an earlier checkpoint the span's first request is no goal: the goal was stated
    before it (the carry-over of the previous summary guards it)."""
    s = coding_span()
    assert "goal" in {p.id for p in derive_probes(s.messages)}
    assert "goal" not in {p.id for p in derive_probes(s.messages, continued=True)}
    previous = "## Goal\nPort render_jsonl.py to JavaScript."
    evaluation = evaluate(s.messages, GOOD, previous_summary=previous, continued=True)
    assert "goal" not in {v.probe.id for v in evaluation.verdicts}


def test_a_command_is_found_by_any_step_of_its_line():
    """`bash -lc 'python3 render.py -o plan.html && sed -n 1,20p plan.html'`: a summary that
    names the run (python3 render.py …) answers it; the shell wrapper is no part of the key."""
    s = Span()
    s.user("render the plan")
    command = (
        "bash -lc 'cd /repo && python3 render.py plan.jsonl -o plan.html && sed -n 1,20p plan.html'"
    )
    s.call("shell", "boom\nexit code: 1", command=command)
    [probe] = [p for p in derive_probes(s.messages) if p.kind is ProbeKind.ERROR_FIX]
    assert answer(probe, ContextText("`python3 render.py plan.jsonl` failed: boom")).held
    assert answer(probe, ContextText("`sed -n 1,20p plan.html` failed: boom")).held
    assert not answer(probe, ContextText("`bash -lc` failed: boom")).held


def test_boilerplate_a_summary_carries_is_counted():
    carried = """This session is being continued from a previous conversation that ran out of context.
<analysis>scratch</analysis>
## Goal
- # AGENTS.md instructions for /Users/me/repo
- <system-reminder>Whenever you read a file</system-reminder>
Please continue the conversation from where we left it off without asking the user any further questions.
"""
    starts = [
        "This session is being continued",
        "Please continue the conversation",
        "<analysis>",
        "# AGENTS.md instructions for /Users/me/repo",
        "<system-reminder>",
    ]
    found = boilerplate_in(carried)
    assert len(found) == len(starts) and all(map(str.startswith, found, starts)), found
    assert boilerplate_in(GOOD) == [] and boilerplate_in(None) == []
    assert len(evaluate(coding_span().messages, carried).figures()["boilerplate"]) == 5


def test_firm_rules_are_asked_first_and_each_open_task_answer_lists_the_open_ones():
    s = Span()
    s.user(". ".join(f"keep the module{n} layout" for n in range(12)) + ". never commit dumps!")
    s.call(
        "TodoWrite",
        "ok",
        todos=[
            {"content": "Write unit tests", "status": "pending"},
            {"content": "Submit PR", "status": "pending"},
        ],
    )
    probes = derive_probes(s.messages)
    instructions = [p for p in probes if p.kind is ProbeKind.INSTRUCTION]
    assert len(instructions) == 10 and instructions[0].answer.startswith("never commit dumps!")
    tasks = [p.answer for p in probes if p.kind is ProbeKind.OPEN_TASKS]
    assert tasks == [
        "Write unit tests (pending); the open list: Write unit tests (pending); Submit PR (pending)",
        "Submit PR (pending); the open list: Write unit tests (pending); Submit PR (pending)",
    ]


def test_a_prohibition_is_keyed_on_what_it_forbids():
    s = Span()
    s.user("Read hello.py and summarize what it prints without editing files.")
    [rule] = [p for p in derive_probes(s.messages) if p.kind is ProbeKind.INSTRUCTION]
    assert rule.negated and rule.all_of == (("editing", "editi"),)
    summary = "## Constraints\n- Read hello.py and summarize what it prints without editing files."
    assert answer(rule, ContextText(summary)).held


def test_a_session_that_changed_many_files_is_asked_about_more_of_them():
    s = Span()
    s.user("scaffold the package")
    for n in range(30):
        s.call("Write", "File created", file_path=f"/repo/pkg/mod{n}.py", content="x = 1")
    files = [p for p in derive_probes(s.messages) if p.kind is ProbeKind.FILE_CHANGED]
    assert len(files) == 25 and files[-1].all_of == (("/repo/pkg/mod24.py", "mod24.py"),)
