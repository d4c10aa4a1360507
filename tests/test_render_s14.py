"""The budget spent by value (issue #42 item 5) and report lines with figures kept whole (item
3), each rule on plain lists and on a real span of the shared transcripts."""

from __future__ import annotations

import json

import pytest

from ctxtool.compaction.summarizers import ExtractiveSummarizer, SummaryRequest
from ctxtool.compaction.summarizers.extractive import (
    CONSTRAINTS,
    DONE,
    EARLIER_REQUESTS,
    ERRORS,
    FILES_CHANGED,
    FINDINGS,
    READ,
    _fit,
    _Item,
    _trim_order,
    fix_gist,
    retry_gist,
    settings_written,
)
from ctxtool.compaction.summarizers.span_notes import (
    findings_along_the_way,
    has_figure,
    read_span,
)
from ctxtool.core.records import Message

from .keyed_spans import extractive_summary, keyed_span_named, section

RETRY = (
    "- Edit refused (3 times): File has not been read yet — fixed: retried at once, it succeeded"
)
FIX = "- `npm run build` failed: error TS2339 — fixed: a later run succeeded after changing a.ts"


@pytest.fixture(scope="module")
def span(tmp_path_factory):
    def load(name: str):
        return keyed_span_named(name, tmp_path_factory.mktemp(name[:30]))

    return load


def _items() -> dict[str, _Item]:
    return {
        "retry": _Item(ERRORS, RETRY, 5, resolved=True, retry=True),
        "fix": _Item(ERRORS, FIX, 1, resolved=True),
        "read": _Item(READ, "src/a.py", 2),
        "reason": _Item(FILES_CHANGED, "- `a.ts` — why", 3, fallback="- `a.ts`"),
        "old": _Item(FILES_CHANGED, "- `b.ts`", 0),
        "rule": _Item(CONSTRAINTS, "- never push", 4),
    }


@pytest.mark.parametrize("allowed", [None, 3])
def test_a_fix_is_cut_after_the_noise_the_read_paths_and_the_reasons(allowed):
    items = _items()
    order = [i.text for i in _trim_order(list(items.values()), allowed)]
    at = {name: order.index(item.text) for name, item in items.items()}
    assert at["retry"] < at["read"] < at["reason"] < at["fix"] < at["rule"]
    if allowed is None:  # among the other items by age: the older file goes first
        assert at["old"] < at["fix"]


def test_paradocs_fixed_fetch_failure_stays_at_8k(span):
    paradocs = span("pi--paradocs-session--committed")
    small = section(extractive_summary(paradocs, 1500), ERRORS)
    fetch = [i for i in small if i.startswith("- `fetch_url")]
    assert fetch, small
    assert "HTTP fallback failed" in fetch[0]
    assert "— fixed: `batch_extract_failed` succeeded" in fetch[0]


REPORT = (
    "Brief added to `ROADMAP.md` (new partner subsection).\n\n"
    "Key findings:\n\n"
    "- **Visa track**: Sidetrack on the Frontier Hackathon (Apr 6 – May 11, 2026), "
    "Germany-only, 10,000 USDG prize pool, winners May 27, 2026, contact `@zCasee` on TG. "
    "The public listing does not enumerate a rubric or mandate specific SDKs.\n"
)


def _task_run(report: str) -> list[Message]:
    call = {"id": "t1", "type": "function", "function": {"name": "Task"}}
    call["function"]["arguments"] = json.dumps({"description": "Research the track"})
    return [
        Message(id=1, session_id=1, role="user", content="Research the hackathon track"),
        Message(id=2, session_id=1, role="assistant", content="", tool_calls=[call]),
        Message(id=3, session_id=1, role="tool", content=report, tool_call_id="t1"),
    ]


def test_a_sub_agent_s_report_is_said_whole_while_there_is_room():
    notes = read_span(_task_run(REPORT))
    [short] = notes.delegated
    assert short.endswith("[…]") and "10,000 USDG" not in short
    whole = notes.delegated_whole[short]
    assert whole.startswith("Task (Research the track): Brief added to `ROADMAP.md`")
    assert "10,000 USDG prize pool" in whole
    roomy = ExtractiveSummarizer().summarize(SummaryRequest(None, _task_run(REPORT), {}))
    assert "10,000 USDG prize pool" in "\n".join(section(roomy.text, DONE))
    # a short report is one form only
    assert read_span(_task_run("Created `a.py`.")).delegated_whole == {}


def test_fundwise_s_research_agent_reports_the_prize_at_16k(span):
    """Claude Code on FundWise: a research sub-agent's key finding (the Visa track's
    10,000 USDG prize pool) was cut after its first line though the summary had room."""
    fundwise = span("claude-code--FundWise-claude-session--zerion-before-build")
    done = section(extractive_summary(fundwise, 3500), DONE)
    agent = [i for i in done if i.startswith("- Agent (Research Visa")]
    assert agent and "10,000 USDG prize pool" in agent[0], done


def _said(*texts: str) -> list[Message]:
    out = [Message(id=1, session_id=1, role="user", content="Benchmark the engine")]
    for n, text in enumerate(texts, 2):
        out.append(Message(id=n, session_id=1, role="assistant", content=text))
    return out


def test_what_the_agent_found_along_the_way_is_kept_not_what_it_is_about_to_do():
    found = findings_along_the_way(
        _said(
            "I'm running the release benchmark now.",
            "The release core processed 200,000 events in 372 ms. Next I check the replay.",
            "Is `cargo` on the PATH? The suite has 12 passing tests:",
            "All done: the engine is benchmarked.",  # the turn's report, said elsewhere
        )
    )
    assert found == ["The release core processed 200,000 events in 372 ms."]
    assert has_figure(found[0]) and not has_figure("Build the page")


def test_edgerunner_s_benchmark_figures_are_found_at_16k(span):
    """Codex on edgerunner: the release benchmark's figures were only in the agent's words
    between its calls, never in a turn's report nor next to a change."""
    edgerunner = span("codex--edgerunner-codex-session")
    found = section(extractive_summary(edgerunner, 3500), FINDINGS)
    assert any("200,000 events in 372 ms" in f for f in found), found


def test_a_fix_s_gist_names_the_files_it_changed_and_keeps_its_code():
    item = (
        "- `cargo clippy --workspace` failed: error: invalid format string (then: I look.)"
        " — fixed: `cargo fmt --all -- --check && cargo clippy --workspace` succeeded after"
        " changing /Users/a/Desktop/new/crates/edgerunner-core/src/risk.rs"
        " (`let rejected = matches!(`)"
    )
    short = fix_gist(item)
    assert short.endswith("after changing risk.rs (`let rejected = matches!(`)"), short
    assert "`cargo fmt --all -- --check && cargo clippy --workspace`" in short
    # a path inside the code or the command is never shortened
    code = "- `ls a/b.py` failed: No such file — fixed: `ls c/d.py` succeeded after changing e/f.py (`g/h.py`)"
    assert fix_gist(code).endswith("`ls c/d.py` succeeded after changing f.py (`g/h.py`)")


def test_edgerunner_s_format_string_fix_keeps_its_code_at_8k(span):
    """Codex on edgerunner: the clippy failure's fix (`let rejected = matches!(` in risk.rs)
    was cut behind the fix command and the file's whole path at 8k."""
    edgerunner = span("codex--edgerunner-codex-session")
    errors = section(extractive_summary(edgerunner, 1500), ERRORS)
    [line] = [e for e in errors if "invalid format string" in e]
    assert "after changing risk.rs (`let rejected = matches!(`)" in line, line


def test_a_retry_cut_first_leaves_its_complaint_in_one_short_line():
    gist = retry_gist(RETRY.replace(" — fixed:", " (on a.py, b.md) — fixed:"))
    assert gist == "- Edit refused (3 times): File has not been read yet — retried at once"
    # over budget the line is cut first (the order) and its gist stays
    items = [_Item(ERRORS, RETRY, 1, resolved=True, retry=True, fallback=gist)]
    items.append(_Item(FILES_CHANGED, "- `a.py` — " + "why " * 200, 2, fallback="- `a.py`"))
    text, _ = _fit(items, [], 75, "o200k_base", 0)
    assert gist in text and RETRY not in text


def test_a5c478e1_s_edit_refused_before_a_read_is_said_at_8k(span):
    """Claude Code on erk (a5c478e1): Edit refused three times with 'File has not been read
    yet' and retried; at 8k the line went whole, the first thing cut."""
    erk = span("claude-code--a5c478e1-0d31-46d4-9fd6-3b6b203b3752--mid-implementation")
    errors = section(extractive_summary(erk, 1500), ERRORS)
    assert any(e.startswith("- Edit refused") and "has not been read" in e for e in errors), errors


def test_a_request_said_whole_outlasts_the_names_a_file_s_edits_bring_in():
    request = _Item(EARLIER_REQUESTS, "- Build the program.", 1, extra_first=True)
    request.longer = "- Build the program. Seed it with " + "Sudirman Park, " * 12
    changed = _Item(FILES_CHANGED, "- `a.py` — why", 2, extra_first=True)
    changed.longer = "- `a.py` — why (its edits bring in " + "`name`, " * 12 + ")"
    text, _ = _fit([request, changed], [], 140, "o200k_base", 0)
    assert "Sudirman Park" in text and "bring in" not in text


def test_the_settings_of_a_small_configuration_file_are_said():
    toml = (
        '[viewer]\nsource = "example.jsonl"\n# the collapse\ncollapse_output_line_threshold = 300\n'
    )
    assert settings_written(toml) == [
        'source = "example.jsonl"',
        "collapse_output_line_threshold = 300",
    ]
    assert settings_written("name: app\nport: 8080") == ["name: app", "port: 8080"]
    assert settings_written("def f(x):\n    return x\n") == []  # code is no configuration
    assert settings_written("\n".join(f"k{n} = {n}" for n in range(20))) == []  # nor a long file


def test_the_log_viewer_s_collapse_thresholds_are_said_at_its_toml(span):
    """Codex on codex_log_viewer: the agent wrote viewer.toml whole (two collapse thresholds);
    the summary listed the bare path."""
    viewer = span("codex--20260213134203_redacted_current_codex_session_jsonl_export--mid-rename")
    changed = section(extractive_summary(viewer, 3500), FILES_CHANGED)
    [toml] = [c for c in changed if "viewer.toml`" in c.split(" ")[1]]
    assert "`collapse_output_char_threshold = 15000`" in toml, toml
