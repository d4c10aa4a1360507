"""The budget spent by value (issue #42 item 5), each rule on plain lists and on a real span:
a fixed failure shrinks to one line of cause -> fix before it is dropped; over budget, the
changed files under one root are listed relative to it; what the last cuts freed past the
budget comes back; an earlier request is said whole in spare room."""

from __future__ import annotations

import re

import pytest

from ctxtool.compaction.summarizers import ExtractiveSummarizer, SummaryRequest
from ctxtool.compaction.summarizers.extractive import (
    DONE,
    EARLIER_REQUESTS,
    ERRORS,
    FILES_CHANGED,
    _fit,
    _Item,
    common_root,
    fix_gist,
    folded_paths,
    relative_paths,
    whole_paths,
)
from ctxtool.compaction.summarizers.span_notes import REQUEST_CHARS
from ctxtool.core.evaluator import carry_over
from ctxtool.core.records import Message, calls_of
from ctxtool.core.tokens import count_text
from ctxtool.core.touched_files import files_touched

from .keyed_spans import extractive_summary, keyed_span_named, section

ENCODING = "o200k_base"

FETCH = (
    "- `fetch_url https://thunderhooks.com/blog/go-htmx-saas-stack` failed: Obscura not "
    "available and HTTP fallback failed. | ⚠️ Fetch failed: fetch failed (then: Several URLs "
    "failed. Let me fetch working alternatives and process failed ones via Tavily.) — fixed: "
    "`batch_extract_failed` succeeded with format: markdown (the same on 2 more: whentouse.html, "
    "sqlite-persistence-on-the-web)"
)


@pytest.fixture(scope="module")
def span(tmp_path_factory):
    def load(name: str):
        return keyed_span_named(name, tmp_path_factory.mktemp(name[:30]))

    return load


def test_a_fixed_failure_shrinks_to_its_cause_and_fix():
    short = fix_gist(FETCH)
    assert short.startswith(
        "- `fetch_url https://thunderhooks.com/blog/go-htmx-saas-stack` failed:"
    )
    assert "Obscura not available and HTTP fallback failed." in short
    assert short.endswith(
        "— fixed: `batch_extract_failed` succeeded with format: markdown (the same on 2 more)"
    )
    assert "(then:" not in short and "whentouse.html" not in short
    # a long command is shown shortened, the cut said outside its backticks
    long = (
        "- `"
        + "npm run build -- --filter "
        + "pkg " * 40
        + "` failed: error TS2305 — fixed: `npm ci` succeeded"
    )
    assert "(shortened) failed: error TS2305 — fixed: `npm ci` succeeded" in fix_gist(long)
    assert len(fix_gist(long)) < len(long)


def test_an_open_failure_or_a_short_one_stays_as_it_is():
    still_open = (
        "- `cargo test` failed: error[E0277]: `Rc<T>` cannot be sent (then: I look.) — still open"
    )
    assert fix_gist(still_open) == still_open
    short = "- `ls x` failed: No such file — fixed: `ls y` succeeded"
    assert fix_gist(short) == short


def test_paradocs_fixed_citation_failure_keeps_its_fix_at_8k(span):
    paradocs = span("pi--paradocs-session")
    small = section(extractive_summary(paradocs, 1500), ERRORS)
    citation = [i for i in small if i.startswith("- `resolve_citation")]
    assert citation, small
    assert "Could not parse" in citation[0] and "no fallback metadata" in citation[0]
    assert "— fixed: a later run succeeded with authors:" in citation[0]
    # one line of cause -> fix while the room is short (:func:`fix_gist`); here, with the
    # fixes cut after the reasons, there is room for it whole
    # with room, the failure is said whole: what the agent said then, every target
    whole = section(extractive_summary(paradocs, 3500), ERRORS)
    full = [i for i in whole if i.startswith("- `resolve_citation")]
    assert "(then: Need to provide fallback metadata" in full[0]
    assert "sqlite-production-guide" in full[0]


def test_the_root_every_absolute_path_shares():
    assert common_root(["/home/u/proj/a.py", "/home/u/proj/src/b.py", "rel.py"]) == "/home/u/proj/"
    assert common_root(["/home/u/proj/src/a.py", "/home/u/proj/src/b.py"]) == "/home/u/proj/src/"
    assert common_root(["/home/a.py", "/home/b.py"]) is None  # / and one directory: no root
    assert common_root(["/srv/x/a.py", "/home/u/b.py"]) is None
    assert common_root(["/home/u/proj/a.py", "src/b.py"]) is None  # one absolute path


def test_erk_s_changed_files_say_their_root_once_at_8k(span):
    erk = span("claude-code--a5c478e1-0d31-46d4-9fd6-3b6b203b3752--before-compaction")
    small = section(extractive_summary(erk, 1500), FILES_CHANGED)
    assert small[0] == "- (paths relative to `/home/runner/work/erk/erk/`)"
    assert not any("`/home/runner/work/erk/erk/" in i for i in small[1:])
    assert any(i.startswith("- `src/erk/cli/commands/exec/group.py`") for i in small)
    # with room, every path is written as the session named it
    whole = section(extractive_summary(erk, 3500), FILES_CHANGED)
    assert any(
        i.startswith("- `/home/runner/work/erk/erk/src/erk/cli/commands/exec/group.py`")
        for i in whole
    )
    assert not any("relative to" in i for i in whole)


ROOT_LINE = re.compile(r"^- \(paths relative to `([^`]+)`\)$")


def resolved(lines: list[str]) -> list[str]:
    """The files a list of changed files names, as a reader takes them: a root's line covers
    the lines after it; a folded line ("- `dir/`: `a.py`, `b.py`") names each file."""
    root = ""
    out = []
    for line in lines:
        if said := ROOT_LINE.match(line):
            root = said.group(1)
            continue
        found = re.match(r"^- `([^`]+)`(: (.*))?", line)
        if not found:
            continue
        lead = found.group(1) if found.group(1).startswith("/") else root + found.group(1)
        names = re.findall(r"`([^`]+)`", found.group(3) or "") if found.group(2) else [""]
        out += [lead + n for n in names]
    return out


def _compacted(carried: list[str], paths: list[str]) -> list[str]:
    """The changed files a compaction over budget lists: the previous summary's lines (as
    ``_previous`` reads them) and the span's own paths."""
    items = whole_paths([_Item(FILES_CHANGED, t, n, previous=True) for n, t in enumerate(carried)])
    items += [_Item(FILES_CHANGED, f"- `{p}`", 100 + n) for n, p in enumerate(paths)]
    return [i.text for i in relative_paths(items)]


def test_carried_relative_paths_stay_true_under_a_new_root():
    first = [f"/home/u/proj/pkg{n}/mod{n}.py" for n in range(3)]
    second = [f"/home/u/proj/src/core/f{n}.py" for n in range(3)]
    third = ["/srv/data/a.py", "/srv/data/b.py"]
    one = _compacted([], first)
    assert one[0] == "- (paths relative to `/home/u/proj/`)"
    assert "- `pkg0/mod0.py`" in one
    # the next span's files share another root: the carried lines are not put under it
    two = _compacted(one, second)
    assert [line for line in two if ROOT_LINE.match(line)] == [
        "- (paths relative to `/home/u/proj/`)"
    ]
    assert "- `pkg0/mod0.py`" in two and "- `src/core/f0.py`" in two
    assert resolved(two) == first + second
    # alone, the span's files would share /home/u/proj/src/core/, and pkg0/mod0.py under it
    # names another file
    assert _compacted([], second)[0] == "- (paths relative to `/home/u/proj/src/core/`)"
    # a third span's files share no root with them: every path is whole again, no root line
    three = _compacted(two, third)
    assert not any(ROOT_LINE.match(line) for line in three)
    assert resolved(three) == first + second + third
    # the bare function given a summary's lines as they are (root line and all) never says
    # a second root nor puts them under it
    raw = [_Item(FILES_CHANGED, t, n, previous=True) for n, t in enumerate(one)]
    raw += [_Item(FILES_CHANGED, f"- `{p}`", 9) for p in second]
    again = [i.text for i in relative_paths(raw)]
    assert sum(bool(ROOT_LINE.match(line)) for line in again) == 1
    assert resolved(again) == first + second


def test_a_file_named_relative_to_the_session_stays_before_the_root_line():
    items = [
        _Item(FILES_CHANGED, "- `src/a.py`", 1),
        _Item(FILES_CHANGED, "- `/home/u/proj/src/b.py`", 2),
        _Item(FILES_CHANGED, "- `/home/u/proj/lib/c.py`", 3),
    ]
    lines = [i.text for i in folded_paths(relative_paths(items))]
    assert lines == [
        "- `src/a.py`",
        "- (paths relative to `/home/u/proj/`)",
        "- `src/b.py`",
        "- `lib/c.py`",
    ]  # src/a.py and src/b.py: the same directory name, not folded across the root line


def test_erk_compacted_twice_names_every_changed_file_truly(span):
    erk = span("claude-code--a5c478e1-0d31-46d4-9fd6-3b6b203b3752--before-compaction")
    messages = erk.summarized
    cut = 72  # the first span changes files under src/erk/cli/commands/exec/ only

    def files(part: list[Message]) -> dict:
        read, modified = files_touched(calls_of(part))
        return {"read_files": read, "modified_files": modified}

    summarizer = ExtractiveSummarizer()
    first = summarizer.summarize(
        SummaryRequest(None, messages[:cut], files(messages[:cut]), max_tokens=700)
    ).text
    listed = section(first, FILES_CHANGED)
    assert (
        listed[0] == "- (paths relative to `/home/runner/work/erk/erk/src/erk/cli/commands/exec/`)"
    )
    assert "- `group.py`" in listed
    second = summarizer.summarize(
        SummaryRequest(first, messages[cut:], files(messages), max_tokens=1500, min_carry_over=0.9)
    ).text
    listed = section(second, FILES_CHANGED)
    assert [line for line in listed if ROOT_LINE.match(line)] == [
        "- (paths relative to `/home/runner/work/erk/erk/`)"
    ]
    changed = files(messages)["modified_files"]
    named = resolved(listed)
    assert sorted(named) == sorted(changed)  # each changed file once, by its true path
    assert "- `src/erk/cli/commands/exec/group.py`" in listed
    # the carried files are still held; only the old root's line is not
    kept = carry_over(first, second)
    assert kept.missing == (
        "(paths relative to /home/runner/work/erk/erk/src/erk/cli/commands/exec/)",
    )


def test_what_the_last_cut_freed_past_the_budget_comes_back():
    big = _Item(DONE, "- " + "a long report of finished work " * 30, age=1)
    fixed = _Item(
        ERRORS, "- `ls x` failed: No such file — fixed: `ls y` succeeded", 2, resolved=True
    )
    # the fixed failure goes first, then the old report; the report's room holds the failure
    text, trimmed = _fit([big, fixed], [], 150, ENCODING, 0)
    assert "a long report" not in text
    assert "`ls x` failed" in text
    assert trimmed == 1


def test_bhavana_s_summary_at_8k_uses_its_budget(span):
    bhavana = span("claude-code--bhavana-claude-session")
    text = extractive_summary(bhavana, 1500)
    assert "older items trimmed" in text
    # trimmed, yet no cut left more than a short item's room unused
    assert count_text(text, ENCODING) > 1500 - 100


def _request_span(first: str) -> list[Message]:
    return [
        Message(1, 1, "user", first),
        Message(2, 1, "assistant", "Built the seed data."),
        Message(3, 1, "user", "Now write the README."),
        Message(4, 1, "assistant", "Writing it."),
    ]


def test_an_earlier_request_is_said_whole_in_spare_room():
    first = "Build the seed program. " + " ".join(
        f"Property {n} is at street {n} with a yield of {n}.{n}% a year." for n in range(1, 20)
    )
    assert len(first) > REQUEST_CHARS
    messages = [Message(0, 1, "user", "Plan the grant work."), *_request_span(first)]

    def earlier(budget: int) -> str:
        request = SummaryRequest(None, messages, {}, max_tokens=budget)
        [item] = [
            i
            for i in section(ExtractiveSummarizer().summarize(request).text, EARLIER_REQUESTS)
            if "seed program" in i
        ]
        return item

    assert "Property 19 is at street 19" in earlier(3500)  # whole: the room is there
    cut = earlier(450)  # short of room: its first 600 characters, cut between sentences
    assert cut.endswith("[…]") and "Property 19" not in cut


def test_bhavana_s_earlier_request_names_its_seed_properties_at_16k(span):
    bhavana = span("claude-code--bhavana-claude-session--wiring-frontend")
    requests = section(extractive_summary(bhavana, 3500), EARLIER_REQUESTS)
    [anchor] = [r for r in requests if "Build the complete Bhavana Anchor program" in r]
    # past its first 600 characters, where the seed properties and their prices are
    assert len(anchor) > REQUEST_CHARS + 2
    assert "Sudirman Park" in anchor
