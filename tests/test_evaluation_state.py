"""eval's derived probes check the state of the work (issue #42 item 6): a summary that calls a
fixed error open, lists a finished task as pending or leaves out the fix scores lower than the
correct summary of the same span."""

from __future__ import annotations

import json

from ctxtool.core.evaluator import ContextText, answer, derive_probes, evaluate, probe_from_dict

from .test_span_facts import Span


def fixed_span() -> Span:
    s = Span()
    s.user("Make the cart total round to cents; tests in tests/test_cart.py must pass")
    todos = [
        {"content": "Fix rounding in cart_total", "status": "in_progress", "activeForm": "x"},
        {"content": "Add a regression test for rounding", "status": "pending", "activeForm": "y"},
    ]
    s.call("TodoWrite", "ok", todos=todos)
    s.call(
        "Bash",
        "FAILED tests/test_cart.py::test_total - AssertionError: 10.005 != 10.01\nexit code: 1",
        command="pytest tests/test_cart.py",
    )
    s.call("Edit", "ok", file_path="src/cart.py", old_string="a", new_string="b")
    s.call("Bash", "3 passed\nexit code: 0", command="pytest tests/test_cart.py")
    done = [dict(t, status="completed") for t in todos]
    s.call("TodoWrite", "ok", todos=done)
    s.add("assistant", "Both tasks are done: cart_total rounds with Decimal and the test passes.")
    return s


CORRECT = """## Goal
Make the cart total round to cents (tests/test_cart.py must pass).

## Errors and fixes
- `pytest tests/test_cart.py` failed: AssertionError: 10.005 != 10.01 — fixed: a later run succeeded after changing src/cart.py

## Files changed and why
- `src/cart.py` — cart_total rounds with Decimal

## Done
- [x] Fix rounding in cart_total
- [x] Add a regression test for rounding
"""
FIXED_CALLED_OPEN = CORRECT.replace(
    "— fixed: a later run succeeded after changing src/cart.py", "— still open"
)
STALE_TASK = CORRECT.replace(
    "## Done\n- [x] Fix rounding in cart_total\n",
    "## Open tasks\n- [in progress] Fix rounding in cart_total\n\n## Done\n",
)
MISSING_FIX = CORRECT.replace(
    " — fixed: a later run succeeded after changing src/cart.py", " (then: I look at cart_total)"
)


def score(summary: str) -> float:
    result = evaluate(fixed_span().messages, summary)
    assert result.score is not None
    return result.score


def test_the_correct_summary_holds_every_state_probe():
    assert score(CORRECT) == 1.0


def test_a_fixed_error_called_open_scores_lower():
    assert score(FIXED_CALLED_OPEN) < score(CORRECT)


def test_a_finished_task_listed_as_pending_scores_lower():
    assert score(STALE_TASK) < score(CORRECT)


def test_a_missing_fix_scores_lower():
    assert score(MISSING_FIX) < score(CORRECT)


def test_state_phrases_of_a_key():
    """``open:``/``pending:`` in a key's ``none_of`` are contradicted only in that state: the
    command named on a line that calls it open, the task listed among the open ones."""
    fixed = probe_from_dict(
        {"id": "e", "kind": "error_fix", "all_of": [["npm test"]], "none_of": ["open: npm test"]}
    )
    assert answer(fixed, ContextText("- `npm test` failed: x — fixed by --runInBand")).held
    assert not answer(fixed, ContextText("- `npm test` failed: x — still open")).held
    task = probe_from_dict(
        {"id": "t", "kind": "open_tasks", "all_of": [["release"]], "none_of": ["pending: release"]}
    )
    assert answer(task, ContextText("## Done\n- [x] release 1.2")).held
    assert not answer(task, ContextText("## Open tasks\n- release 1.2")).held
    assert not answer(task, ContextText("## Plan\n- [ ] release 1.2")).held


def test_the_derived_probes_of_a_finished_task_and_a_fixed_error_name_their_state():
    from ctxtool.core.evaluator import derive_probes

    probes = derive_probes(fixed_span().messages)
    error = next(p for p in probes if p.kind.value == "error_fix")
    assert any(n.startswith("open:") for n in error.none_of)
    done = [p for p in probes if p.kind.value == "open_tasks"]
    assert json.dumps([p.none_of for p in done]).count("pending:") == 2


def test_the_llm_prompt_states_the_same_state_rules():
    from ctxtool.compaction.summarizers.base import SummaryRequest
    from ctxtool.compaction.summarizers.prompt import build_prompt

    prompt = build_prompt(SummaryRequest(None, fixed_span().messages, {}))
    for rule in ("same target", "cause → fix", "placeholder", "(renamed from", "rejected option"):
        assert rule in prompt, rule


def test_a_keys_state_field_asks_the_subject_in_that_state():
    """A hand key's ``state`` (tests/answer_keys/README.md): a ``fixed`` error must not be called
    open, an ``open`` one must be, a ``pending`` task must be listed as to do, a ``done`` one
    must not be."""
    fixed = probe_from_dict(
        {"id": "f", "kind": "error_fix", "state": "fixed", "all_of": [["npm test"], ["runInBand"]]}
    )
    assert answer(fixed, ContextText("- `npm test` crashed → fixed with --runInBand")).held
    assert not answer(fixed, ContextText("- `npm test` crashed (runInBand tried), still open")).held
    still = probe_from_dict({"id": "o", "kind": "error_fix", "state": "open", "all_of": [["tsc"]]})
    assert answer(still, ContextText("## Errors and fixes\n- `tsc` fails: TS2345 in a.ts")).held
    assert answer(still, ContextText("## Notes\n- tsc: 3 errors, still open")).held
    assert not answer(
        still, ContextText("## Errors and fixes\n- `tsc` TS2345 → fixed in a.ts")
    ).held
    assert not answer(still, ContextText("## Files changed\n- ran tsc on a.ts")).held
    todo = probe_from_dict(
        {"id": "p", "kind": "remaining_work", "state": "pending", "all_of": [["Phase 7"]]}
    )
    assert answer(todo, ContextText("## Open tasks\n- [ ] Phase 7 docs")).held
    assert answer(todo, ContextText("## Plan\n- Phase 7 docs (pending)")).held
    assert not answer(todo, ContextText("## Open tasks\n- [x] Phase 7 docs")).held
    assert not answer(todo, ContextText("## Done\n- Phase 7 docs")).held
    done = probe_from_dict(
        {"id": "d", "kind": "open_tasks", "state": "done", "all_of": [["Phase 6"]]}
    )
    assert answer(done, ContextText("## Done\n- [x] Phase 6 CI")).held
    assert not answer(done, ContextText("## Open tasks\n- [in progress] Phase 6 CI")).held
    assert done.as_dict()["state"] == "done"


def test_a_state_that_does_not_fit_the_kind_is_not_a_key():
    import pytest

    from ctxtool.core.evaluator import InvalidKey

    with pytest.raises(InvalidKey):
        probe_from_dict({"id": "x", "kind": "goal", "state": "fixed", "all_of": [["a b c"]]})
    with pytest.raises(InvalidKey):
        probe_from_dict({"id": "y", "kind": "error_fix", "state": "later", "all_of": [["abc"]]})


def two_patch_failures() -> Span:
    """apply_patch fails on src/cart.py and on src/order.py; only the cart.py one is fixed."""
    s = Span()
    s.user("Rename total to cart_total in src/cart.py and src/order.py")
    for path in ("src/cart.py", "src/order.py"):
        s.call(
            "apply_patch",
            f"apply_patch verification failed: Failed to find expected lines in {path}",
            error=True,
            input=f"*** Begin Patch\n*** Update File: {path}\n@@\n-total\n+cart_total\n*** End Patch",
        )
    s.call(
        "apply_patch",
        "Success. Updated the following files:\nM src/cart.py",
        input="*** Begin Patch\n*** Update File: src/cart.py\n@@\n-x\n+cart_total\n*** End Patch",
    )
    return s


def test_an_open_failure_of_a_tool_does_not_contradict_its_fixed_one():
    """A derived error probe's subject is the tool and its target (issue #42: the tool alone
    let the open failure on order.py count as the fixed one on cart.py called open)."""
    messages = two_patch_failures().messages
    errors = [p for p in derive_probes(messages) if p.kind.value == "error_fix"]
    assert len(errors) == 2
    said = (
        "## Errors and fixes\n"
        "- apply_patch refused: Failed to find expected lines in src/cart.py — fixed: retried\n"
        "- `apply_patch` failed: Failed to find expected lines in src/order.py — still open\n"
    )
    context = ContextText(said)
    assert [answer(p, context).contradicted for p in errors] == [(), ()]
    assert all(answer(p, context).held for p in errors)
    wrong = ContextText(said.replace("src/cart.py — fixed: retried", "src/cart.py — still open"))
    assert answer(errors[0], wrong).contradicted
