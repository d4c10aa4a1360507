"""#45 item 12: planning counts the fixed texts of a compaction once (the summary message's
preface once an encoding, the previous summary and the system prompt once a preparation),
and every figure is what counting each time gives."""

from __future__ import annotations

from ctxtool.core import prepare as prepare_module
from ctxtool.core.plan import CompactionSettings
from ctxtool.core.prepare import carry_over_floor, prepare, start_preparation
from ctxtool.core.records import SUMMARY_PREFIX, Compaction, Message, RestoredContext
from ctxtool.core.tokens import REPLY_PRIMING_TOKENS, count_text

from .conftest import TRANSCRIPTS

SETTINGS = CompactionSettings(context_window=6000, reserve_tokens=1000, keep_recent_tokens=1500)


def _texts_of_a_real_transcript() -> list[str]:
    """Lines of the real transcripts as written (their JSON: messages, tool results), each
    under 20,000 characters, in the order read."""
    out = []
    for path in sorted(TRANSCRIPTS.rglob("*.jsonl")):
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
            if 200 < len(line) < 20_000:
                out.append(line)
    assert len(out) > 100
    return out


def test_the_summary_framing_is_counted_once_an_encoding():
    for encoding in ("o200k_base", "cl100k_base", "o200k_base"):
        assert prepare_module._summary_framing(encoding) == (
            count_text(SUMMARY_PREFIX, encoding) + 8 + REPLY_PRIMING_TOKENS
        )
    assert set(prepare_module._FRAMING) >= {"o200k_base", "cl100k_base"}


def test_the_previous_summary_and_the_system_prompt_counted_once_are_their_counts():
    texts = sorted(_texts_of_a_real_transcript(), key=len)
    previous_text, prompt, other_prompt = texts[-1], texts[-2], texts[-3]
    for encoding in ("o200k_base", "cl100k_base"):
        previous = Compaction(1, 1, previous_text, 1)
        prep = start_preparation(
            1, 50_000, previous, None, SETTINGS, encoding, max_summary_tokens=900
        )
        assert prep.previous_tokens == count_text(previous_text, encoding) > 0
        assert carry_over_floor(prep, 0.9) is not None
        # a new prompt is counted anew (a preparation asked about two prompts never mixes them)
        assert prep.system_tokens(prompt) == count_text(prompt, encoding)
        assert prep.system_tokens(other_prompt) == count_text(other_prompt, encoding)
        assert prep.system_tokens(prompt) == count_text(prompt, encoding)
        none = start_preparation(1, 50_000, None, None, SETTINGS, encoding, max_summary_tokens=900)
        assert none.previous_tokens == 0


def test_a_plan_with_a_system_prompt_keeps_what_the_prompt_leaves_room_for():
    """The kept room is the threshold less the prompt's count: a prompt twice as long keeps
    less, by what the counts say."""
    texts = _texts_of_a_real_transcript()
    messages = [
        Message(i + 1, 1, "user" if i % 2 == 0 else "assistant", t[:2000], token_count=None)
        for i, t in enumerate(texts[:40])
    ]
    for m in messages:
        m.token_count = count_text(m.content or "", "o200k_base") + 4
    short, long_ = "You are a coding agent.", "You are a coding agent. " * 120
    preps = [
        prepare(
            RestoredContext(1, prompt, None, list(messages)),
            None,
            SETTINGS,
            "o200k_base",
            max_summary_tokens=900,
        )
        for prompt in (short, long_)
    ]
    heads = [prepare_module._kept_room(p, s)[0] for p, s in zip(preps, (short, long_))]
    assert heads == [count_text(short, "o200k_base") + 8, count_text(long_, "o200k_base") + 8]
    rooms = [prepare_module._kept_room(p, s)[1] for p, s in zip(preps, (short, long_))]
    assert (
        rooms[0] - rooms[1]
        == heads[1] - heads[0] + preps[0].summary_budget - preps[1].summary_budget
    )
