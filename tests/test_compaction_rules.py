"""Pure compaction rules on plain lists: odd tool calls, durations, leases, request parameters
per model family, chunked folding, and the checkpoint-span rule `validate` uses."""

from __future__ import annotations

from dataclasses import replace

import pytest

from ctxtool.compaction.fold import chunk_transcript, fold
from ctxtool.compaction.summarizers import (
    ExtractiveSummarizer,
    SummarizerSettings,
    Summary,
    SummaryRequest,
    make_summarizer,
)
from ctxtool.compaction.summarizers.openai import request_parameters, request_style
from ctxtool.core.durations import MAX_DURATION_S, lease_seconds_for, parse_duration
from ctxtool.core.errors import CtxtoolError
from ctxtool.core.plan import plan_message
from ctxtool.core.records import Compaction, Message, call_name, calls_of
from ctxtool.core.tokens import count_text
from ctxtool.core.validation import deleted_from_span, unsummarized_messages


@pytest.mark.parametrize("raw", [{"a": 1}, ["call_1"], [None], 42, "x", None, [{"function": 7}]])
def test_odd_tool_calls_are_no_calls(raw):
    m = Message(1, 1, "assistant", None, tool_calls=raw)
    calls = calls_of([m])
    assert all(isinstance(c, dict) for c in calls)
    assert all(call_name(c) == "?" for c in calls)
    assert plan_message(m).call_ids == m.call_ids
    ExtractiveSummarizer().summarize(
        SummaryRequest(None, [Message(1, 1, "assistant", None, tool_calls=raw)], {})
    )


def test_durations_need_a_unit():
    assert (
        parse_duration("90s") == 90
        and parse_duration("10m") == 600
        and parse_duration(" 2h ") == 7200
    )
    assert parse_duration(None) is None
    for bad in ("10", "10x", "m", "-5m"):
        with pytest.raises(CtxtoolError) as info:
            parse_duration(bad)
        assert info.value.exit_code == 2 and "unit" in str(info.value)
    # Digits of other scripts are not a number here; a span no server can subtract is refused.
    for bad in ("１０m", "٣h", "99999999999d", "3651d"):
        with pytest.raises(CtxtoolError) as info:
            parse_duration(bad)
        assert info.value.exit_code == 2
    assert parse_duration("2w") == 14 * 86400 and parse_duration("3650d") == 3650 * 86400


def test_lease_is_sized_from_the_summarizer_in_use():
    assert lease_seconds_for(ExtractiveSummarizer().seconds_per_request()) == 120
    assert lease_seconds_for(120 * 5 + 32) == 692  # LLM: timeout x attempts + backoff + margin
    assert lease_seconds_for(100, requests=4) == 460  # folding: per chunk
    assert lease_seconds_for(10, requested=900) == 900  # --lease-seconds is a floor


def test_a_lease_never_outgrows_the_servers_date_arithmetic():
    """A lease past ten years overflowed MariaDB's date arithmetic (1441, 1916) and an
    infinite or nan timeout ended in int()'s OverflowError / ValueError: held ten years."""
    for seconds, requests, requested in (
        (float("nan"), 1, None),
        (float("inf"), 1, None),
        (86400 * 21.0, 10_000, None),
        (10, 1, 10**30),
    ):
        assert lease_seconds_for(seconds, requests, requested) == MAX_DURATION_S
    for timeout in (float("nan"), float("inf"), 0.0, -1.0, 86401.0):
        with pytest.raises(CtxtoolError, match="LLM timeout") as info:
            make_summarizer(SummarizerSettings(kind="openai", api_key="k", timeout=timeout))
        assert info.value.exit_code == 2


@pytest.mark.parametrize(
    "model,style,params",
    [
        ("gpt-4o-mini", "chat", {"max_tokens": 500, "temperature": 0}),
        ("o3-mini", "reasoning", {"max_completion_tokens": 500 + 8192}),
        ("o1", "reasoning", {"max_completion_tokens": 500 + 8192}),
        ("gpt-5", "reasoning", {"max_completion_tokens": 500 + 8192}),
        ("openai/gpt-5-mini", "reasoning", {"max_completion_tokens": 500 + 8192}),
        ("gpt-5-chat-latest", "chat", {"max_tokens": 500, "temperature": 0}),
        ("qwen2.5-coder:32b", "chat", {"max_tokens": 500, "temperature": 0}),
        ("llama3.1", "chat", {"max_tokens": 500, "temperature": 0}),
    ],
)
def test_request_parameters_per_model_family(model, style, params):
    assert request_style(model) == style
    assert request_parameters(model, 500) == params
    assert "temperature" not in request_parameters(model, 500, "reasoning")
    assert request_parameters(model, 500, "chat")["max_tokens"] == 500


def _span(n, size):
    body = " ".join(f"w{i}" for i in range(size))
    return [
        Message(i, 1, "user" if i % 2 else "tool", f"{i}: {body}", tool_call_id="c")
        for i in range(1, n + 1)
    ]


def test_chunks_stay_within_their_budget_and_clip_a_giant_message():
    messages = _span(40, 300) + [Message(99, 1, "user", "HEAD " + "x " * 20000 + " the TAIL error")]
    chunks = chunk_transcript(messages, 2000, "o200k_base")
    assert len(chunks) > 3
    assert all(count_text(text) <= 2000 for _, text in chunks)
    assert [m.id for members, _ in chunks for m in members] == [m.id for m in messages]
    last = chunks[-1][1]
    assert "HEAD" in last and "the TAIL error" in last and "[clipped:" in last


def test_fold_summarizes_chunk_onto_chunk():
    seen = []

    def summarize(request):
        seen.append(request)
        return Summary(f"summary after {len(seen)}", "fake")

    request = SummaryRequest("the first summary", _span(200, 300), {}, max_tokens=500)
    summary = fold(summarize, request, input_tokens=8000)
    assert summary.requests == len(seen) > 3 and summary.text == f"summary after {len(seen)}"
    assert seen[0].previous_summary == "the first summary"
    assert [r.previous_summary for r in seen[1:]] == [
        f"summary after {i}" for i in range(1, len(seen))
    ]
    assert fold(summarize, SummaryRequest(None, _span(2, 10), {}), None).requests == 1


def test_every_folded_request_fits_even_with_a_huge_previous_summary():
    from ctxtool.compaction.summarizers.prompt import SYSTEM_PROMPT, build_prompt

    sizes = []

    def summarize(request):
        sizes.append(count_text(SYSTEM_PROMPT) + count_text(build_prompt(request)))
        return Summary("## Goal\nshort", "fake")

    huge = "## Next Steps\n" + "\n".join(f"- step {i} " + "detail " * 30 for i in range(3000))
    request = SummaryRequest(
        huge, _span(300, 300), {"read_files": [f"f{i}.py" for i in range(300)]}, max_tokens=1000
    )
    fold(summarize, request, input_tokens=20_000)
    assert len(sizes) > 3 and max(sizes) <= 20_000


def test_a_previous_summary_goes_whole_into_the_fold_unless_no_request_could_hold_it():
    from ctxtool.compaction.fold import previous_summary_limit

    seen = []

    def summarize(request):
        seen.append(request)
        return Summary("## Goal\nshort", "fake")

    bound = 12_000
    probe = SummaryRequest(None, _span(100, 300), {}, max_tokens=500)
    limit = previous_summary_limit(probe, bound)
    assert bound // 3 < limit < bound
    # Half the bound: more than the third that used to be kept, still within the limit.
    items = "\n".join(f"- item {i} keeps fact_{i}.py" for i in range(2000))
    whole = "## Done\n" + items
    whole = whole[: len(whole) * (bound // 2) // count_text(whole)]
    assert bound // 3 < count_text(whole) < limit
    summary = fold(summarize, replace(probe, previous_summary=whole), input_tokens=bound)
    assert seen[0].previous_summary == whole
    assert not any("clipped" in note for note in summary.notes)

    seen.clear()
    huge = "## Done\n" + items * 3
    assert count_text(huge) > limit
    summary = fold(summarize, replace(probe, previous_summary=huge), input_tokens=bound)
    assert count_text(seen[0].previous_summary) <= limit + 50
    assert any("previous summary" in note and "clipped" in note for note in summary.notes)


def _checkpoint(details):
    return Compaction(2, 1, "s", 50, details=details)


def test_a_message_inside_a_summarized_span_is_found():
    cp = _checkpoint(
        {
            "summarised_messages": 3,
            "summarised_id_sum": 10 + 11 + 13,
            "summarised_from_message_id": 10,
            "summarised_to_message_id": 13,
        }
    )
    assert unsummarized_messages(cp, [10, 11, 13]) == []
    assert unsummarized_messages(cp, [10, 11, 12, 13]) == [12]
    assert unsummarized_messages(cp, [9, 10, 11, 12, 13]) in ([9, 12], [9, 10, 11, 12, 13])
    assert unsummarized_messages(_checkpoint({"summarised_messages": 3}), [1]) is None
    assert unsummarized_messages(_checkpoint(None), [1]) is None


def test_a_summarized_message_deleted_is_told_apart_from_one_left_out():
    """Found by review: deleting message 11 made validate name messages 10 and 13 (summarized)
    as 'not summarized'."""
    cp = _checkpoint(
        {
            "summarised_messages": 3,
            "summarised_id_sum": 10 + 11 + 13,
            "summarised_from_message_id": 10,
            "summarised_to_message_id": 13,
        }
    )
    assert deleted_from_span(cp, [10, 13]) == (1, 11)
    assert unsummarized_messages(cp, [10, 13]) is None
    assert deleted_from_span(cp, [13]) == (2, None)
    assert deleted_from_span(cp, [10, 11, 13]) == (0, None)
    assert deleted_from_span(cp, [10, 11, 12, 13]) == (0, None)  # one arrived: the other rule
    assert deleted_from_span(_checkpoint(None), []) == (0, None)


def test_suffix_tokens_trust_only_counts_that_are_what_is_sent():
    from ctxtool.core.context_size import (
        context_bounds,
        needs_measuring,
        suffix_tokens,
        synthetic_result_tokens,
    )
    from ctxtool.core.records import Message

    def call(i, *ids):
        return Message(
            i,
            1,
            "assistant",
            None,
            [
                {"id": c, "type": "function", "function": {"name": "f", "arguments": "{}"}}
                for c in ids
            ],
            token_count=20,
            token_encoding="o200k_base",
        )

    suffix = [
        Message(1, 1, "user", token_count=10, token_encoding="o200k_base"),
        call(2, "a", "b"),
        Message(3, 1, "tool", tool_call_id="a", token_count=7, token_encoding="o200k_base"),
    ]
    counted = suffix_tokens(suffix, "o200k_base")  # b has no result: a placeholder is sent
    assert (counted.tokens, counted.synthetic, counted.known) == (
        37 + synthetic_result_tokens("o200k_base"),
        1,
        True,
    )
    assert suffix_tokens(suffix, "cl100k_base").uncounted == 3  # gpt-4 reads other tokens
    orphan = suffix_tokens(
        [Message(4, 1, "tool", tool_call_id="z", token_count=5, token_encoding="o200k_base")],
        "o200k_base",
    )
    assert orphan.resent == 1 and not orphan.known  # resent as a user message with a preface
    low, high = context_bounds(counted, head_bytes=1000)
    assert high - low > 1000
    assert needs_measuring(counted, 1000, low) and not needs_measuring(counted, 1000, high)
    assert not needs_measuring(counted, 1000, low - 1)  # over whatever the head holds


def test_summed_suffixes_are_exact_only_where_calls_and_results_could_pair():
    """Set-based sums know how many calls and results a suffix has, not which answers which:
    unequal numbers must be read; equal numbers widen the upper bound by what a mispaired pair
    can add (a placeholder result, a resend prefix with the call id)."""
    from ctxtool.core.context_size import (
        context_bounds,
        needs_measuring,
        summed_suffix,
        synthetic_result_tokens,
    )

    plain = summed_suffix(1000, 0, 0, 0, 0, "o200k_base")
    assert plain.known and context_bounds(plain, 0)[1] - context_bounds(plain, 0)[0] < 120
    assert not summed_suffix(1000, 0, 3, 2, 10, "o200k_base").known
    assert not summed_suffix(1000, 1, 0, 0, 0, "o200k_base").known
    paired = summed_suffix(1000, 0, 8, 8, 10, "o200k_base")
    low, high = context_bounds(paired, 0)
    assert paired.known and low == context_bounds(plain, 0)[0]
    assert high - low >= 8 * (synthetic_result_tokens("o200k_base") + 10 + 60)
    assert needs_measuring(paired, 0, low + 300) and not needs_measuring(plain, 0, low + 300)
    # Unequal numbers: a placeholder for every call or a prefix on every result at most, so a
    # threshold far from the sum decides without reading the pairing (a 3-call turn in flight).
    unpaired = summed_suffix(1000, 0, 3, 2, 10, "o200k_base")
    low, high = context_bounds(unpaired, 0)
    assert high - low >= 3 * (synthetic_result_tokens("o200k_base") + 10 + 60)
    assert needs_measuring(unpaired, 0, low) and needs_measuring(unpaired, 0, high - 1)
    assert not needs_measuring(unpaired, 0, high) and not needs_measuring(unpaired, 0, low - 1)
    assert needs_measuring(summed_suffix(1000, 1, 0, 0, 0, "o200k_base"), 0, 10**9)
