"""The extractive summary's state rules on plain lists of messages (no database): what the
span or the kept messages overtook is not written as pending, and the budget is spent by
value. tests/test_state_real_spans.py checks the same rules on real transcript spans."""

from __future__ import annotations

import json

from ctxtool.compaction.summarizers import ExtractiveSummarizer, SummaryRequest
from ctxtool.core.records import Message
from ctxtool.core.sections import parse_sections


class Span:
    def __init__(self, first_id: int = 1):
        self.messages: list[Message] = []
        self._next = first_id

    def add(self, role, content=None, **kw) -> Message:
        m = Message(self._next, 1, role, content, **kw)
        self._next += 1
        self.messages.append(m)
        return m

    def call(self, name, result, **arguments) -> None:
        call_id = f"call_{self._next}"
        function = {"name": name, "arguments": json.dumps(arguments)}
        self.add("assistant", None, tool_calls=[{"id": call_id, "type": "function", "function": function}])  # fmt: skip
        self.add("tool", result, tool_call_id=call_id)


def _todos(*statuses: str) -> list[dict]:
    names = ("Phase 1: Write the parser", "Phase 2: Submit PR")
    return [{"content": n, "status": s} for n, s in zip(names, statuses)]


def section(text: str, heading: str) -> list[str]:
    return [i for s in parse_sections(text) if s.heading == heading for i in s.items]


def summarize(messages, split_turn=False, kept=(), previous=None, budget=3500, files=None):
    request = SummaryRequest(
        previous, messages, files or {}, split_turn, max_tokens=budget, kept=kept
    )
    return ExtractiveSummarizer().summarize(request).text


def test_a_split_turn_s_task_list_is_left_to_the_kept_messages_that_update_it():
    span = Span()
    span.add("user", "Implement the plan")
    span.call("TodoWrite", "ok", todos=_todos("in_progress", "pending"))
    span.add("assistant", "Writing the parser.")
    kept = Span(first_id=100)
    kept.call("TodoWrite", "ok", todos=_todos("completed", "in_progress"))
    text = summarize(span.messages, split_turn=True, kept=kept.messages)
    assert section(text, "Open tasks") == [
        "- (the task list goes on in the messages after this summary)"
    ]
    # without a later update in the kept messages the list at the cut is the one to go on with
    alone = summarize(span.messages, split_turn=True, kept=Span(100).messages)
    assert section(alone, "Open tasks") == [
        "- [in progress] Phase 1: Write the parser",
        "- [ ] Phase 2: Submit PR",
    ]


def test_a_turn_that_ended_on_the_agent_s_words_left_its_calls_done():
    span = Span()
    span.add("user", "Commit the staged changes")
    span.call("commit_changes", "Commit successful. Hash: 5484f07", message="docs: notes")
    span.add("assistant", "Committed `5484f07` with the staged changes. Want me to push it?")
    text = summarize(span.messages)
    # its turn is over: what its words report is done, the question they end on is the next
    # step, and its call is done work; nothing is under way
    assert section(text, "Current work") == []
    assert "> Committed `5484f07` with the staged changes." in section(text, "Done")
    assert any("commit_changes" in line for line in section(text, "Done"))
    assert "> Want me to push it?" in section(text, "Next step")
    step = " ".join(section(text, "Next step"))
    assert step.startswith("The agent ended its turn on the latest request; it asked:")
    assert "Commit the staged" not in step  # answered: quoted as the latest request only
    assert "it asked: Want me to push it?" in step
    # while a call is the span's last message, the agent is still at work
    span.call("bash", "ok", command="git push")
    assert any("git push" in line for line in section(summarize(span.messages), "Current work"))


def test_a_closing_report_with_work_left_keeps_the_work_left_as_the_next_step():
    span = Span()
    span.add("user", "Redact the log")
    span.call("bash", "ok", command="python3 sanitize.py raw.jsonl -o redacted.jsonl")
    span.add("assistant", "I wrote a redacted copy.\nImportant: the raw file still exists.")
    text = summarize(span.messages)
    assert any("raw file still exists" in line for line in section(text, "Next step"))
    assert not any("redacted copy" in line for line in section(text, "Next step"))
    assert "> I wrote a redacted copy." in section(text, "Done")
    assert any("sanitize.py" in line for line in section(text, "Done"))


PREVIOUS = """## Goal
Split the CLI

## Next Steps
- Create `src/cli-new.ts` pointing to `main-new.ts`
- Run `npm run check`

## Key decisions
- Keep the old code for reference until the new CLI works
"""


def test_a_carried_step_the_span_carried_out_is_done_and_trimmed_first():
    span = Span()
    span.add("user", "Go on")
    span.call("write", "ok", path="/repo/src/cli-new.ts", content="export {}")
    span.call("bash", "ok", command="npm run check")
    span.add("assistant", "Both done.")
    text = summarize(span.messages, previous=PREVIOUS)
    done = section(text, "Done")
    # ticked, so that nothing reads them as still to do
    assert "- [x] Create `src/cli-new.ts` pointing to `main-new.ts`" in done
    assert "- [x] Run `npm run check`" in done
    # short of room, the overtaken steps go first, though newer than the carried decisions
    decisions = "\n".join(f"- Decision {n}: keep module {n} as it is" for n in range(8))
    previous = (
        f"## Goal\nSplit the CLI\n\n## Key decisions\n{decisions}\n\n"
        + PREVIOUS.split("## Key decisions")[0].split("\n\n", 1)[1]
    )
    full = summarize(span.messages, previous=previous)
    tight = summarize(span.messages, previous=previous, budget=len(full) // 4 - 25)
    assert "older items trimmed" in tight
    assert "pointing to `main-new.ts`" not in tight
    assert "Decision 7: keep module 7" in tight


def test_bare_changed_paths_say_their_directory_once_when_over_budget():
    span = Span()
    span.add("user", "Write the modules")
    for n in range(30):
        span.call("write", "ok", path=f"/home/me/project/src/core/module_{n}.py", content="x")
    span.add("assistant", "All written.")
    changed = [f"/home/me/project/src/core/module_{n}.py" for n in range(30)]
    files = {"modified_files": changed}
    roomy = summarize(span.messages, files=files)
    assert "- `/home/me/project/src/core/module_7.py`" in section(roomy, "Files changed and why")
    tight = summarize(span.messages, files=files, budget=500)
    listed = section(tight, "Files changed and why")
    # the directory they share said once, the files by their names (test_budget_by_value)
    assert listed[0] == "- (paths relative to `/home/me/project/src/core/`)"
    assert all(any(f"`module_{n}.py`" in f for f in listed) for n in range(30))  # none lost
    assert not any("/home/me" in f for f in listed[1:])
    assert "(clipped" not in tight


def test_a_call_at_the_cut_says_what_came_of_it_and_a_done_one_is_marked():
    from ctxtool.compaction.summarizers.span_notes import is_look, result_gist
    from ctxtool.core.sections import is_done

    commit = (
        "[main f8e6fe0] feat: add the wrapper\n 3 files changed, 388 insertions(+), 1 deletion(-)\n"
        " create mode 100644 docs/wrapper.md\n"
    )
    gist = result_gist("git commit -m 'feat: add the wrapper'", Message(1, 1, "tool", commit))
    assert gist == (
        "[main f8e6fe0] feat: add the wrapper; 3 files changed, 388 insertions(+), 1 deletion(-)"
    )
    status = "On branch main\n\nNo commits yet\n\nUntracked files:\n\tLICENSE\n"
    assert result_gist("git status", Message(2, 1, "tool", status)) == (
        "on branch main; no commits yet; untracked: LICENSE"
    )
    assert result_gist("ls", Message(3, 1, "tool", "a.py\nb.py")) == ""

    def bash(command: str) -> dict:
        arguments = json.dumps({"command": command})
        return {"id": "c", "type": "function", "function": {"name": "Bash", "arguments": arguments}}

    assert is_look(bash("git status --short")) and is_look(bash("ls -la"))
    assert not is_look(bash("git commit -m x")) and not is_look(bash("npm run build"))
    span = Span()
    span.add("user", "Commit it.")
    span.call("Bash", commit, command="git commit -m 'feat: add the wrapper'")
    out = ExtractiveSummarizer().summarize(SummaryRequest(None, span.messages, {})).text
    [line] = [w for w in section(out, "Current work") if "git commit" in w]
    assert is_done(line) and "388 insertions" in line


def test_a_changed_file_s_line_names_what_its_edits_brought_in():
    """A file the agent said something about carries the names its edits brought in (what
    is in it now); a file it said nothing about stays a bare path (folded when short of room)."""
    span = Span()
    span.add("user", "Build the todo app")
    span.add("assistant", "Now the app logic:")
    span.call(
        "Write", "ok", file_path="app.js",
        content="const STORAGE_KEY = 'todos';\nfunction saveTodos() {}\nfunction addTodo() {}",
    )  # fmt: skip
    span.call("Write", "ok", file_path="util.js", content="export function formatDate() {}")
    changed = section(summarize(span.messages), "Files changed and why")
    [app] = [line for line in changed if "`app.js`" in line]
    assert "(adds `STORAGE_KEY`, `saveTodos`, `addTodo`)" in app
    assert "- `util.js`" in changed


def test_an_earlier_answer_is_said_whole_while_there_is_room_and_shrinks_first():
    span = Span()
    span.add("user", "Where are the provider headers loaded?")
    lines = [f"- `loader{n}.ts` reads `header_{n}` from `models.json`" for n in range(12)]
    span.add("assistant", "Here is what I found:\n" + "\n".join(lines))
    span.add("user", "Thanks. Now add a test.")
    span.call("bash", "ok", command="pytest -q")
    roomy = summarize(span.messages)
    earlier = "\n".join(section(roomy, "Earlier requests"))
    assert "header_11" in earlier and "header_0" in earlier  # the whole report
    # short of room it is the first of the span's own items to shrink, to its first lines
    tight = summarize(span.messages, budget=len(roomy) // 4 - 60)
    earlier = "\n".join(section(tight, "Earlier requests"))
    assert "header_0" in earlier and "header_11" not in earlier and "[…]" in earlier


def test_a_long_goal_and_request_are_whole_while_there_is_room_and_shrink_when_short():
    span = Span()
    goal = " ".join(f"Part {n}: wire module_{n} into the CLI." for n in range(40))
    span.add("user", goal)
    span.call("bash", "ok", command="pytest -q")
    span.add("user", " ".join(f"Then check case_{n} again." for n in range(50)))
    span.call("bash", "ok", command="pytest -q tests/test_cli.py")
    roomy = summarize(span.messages)
    assert "module_39" in section(roomy, "Goal")[0]
    assert "case_49" in section(roomy, "Latest request")[0]
    tight = summarize(span.messages, budget=500)
    [short] = section(tight, "Goal")
    assert "module_0" in short and "module_39" not in short and short.endswith("[…]")
    [quoted] = section(tight, "Latest request")
    assert "case_0" in quoted and "case_49" not in quoted


def test_a_changed_file_names_what_its_edits_brought_in_while_there_is_room():
    span = Span()
    span.add("user", "Add sounds to index.html")
    span.call("write", "ok", path="/repo/index.html", content="a_1 a_2 a_3 a_4 a_5 a_6 a_7")
    span.add("assistant", "Now the sounds:")
    span.call(
        "edit", "ok", path="/repo/index.html", oldText="a_7",
        newText="<script>function playTick() {} function playLand() {} new AudioContext()</script>",
    )  # fmt: skip
    span.add("assistant", "Done: sounds added.")
    text = "\n".join(section(summarize(span.messages), "Files changed and why"))
    assert "its edits bring in `playTick`, `playLand`, `AudioContext`" in text, text
    tight = "\n".join(section(summarize(span.messages, budget=130), "Files changed and why"))
    assert "index.html" in tight and "playTick" not in tight  # the first thing to go


def test_a_request_s_checklist_says_where_each_item_stands_at_the_cut():
    span = Span()
    span.add("user", "Set up the release tooling.")  # the goal; the checklist is the latest
    span.add(
        "user",
        "Please finish the release.\nSteps:\n- [ ] WP7: bump `version.py`\n"
        "- [ ] WP8: tag the release\nThanks!",
    )
    span.call("bash", "ok", command="git commit -am bump")
    span.add("assistant", "WP7 complete: `version.py` bumped. Next: WP8.")
    span.call("bash", "ok", command="git status")
    lines = "\n".join(section(summarize(span.messages), "Latest request")).splitlines()
    assert lines[0] == "> Please finish the release. Steps:"
    assert "> - [x] WP7: bump `version.py` (done since)" in lines
    assert "> - [ ] WP8: tag the release" in lines  # still to do, on a line of its own
    # a request with no checklist is one line, as before
    plain = Span()
    plain.add("user", "Set up the release tooling.")
    plain.add("user", "Bump the version.\nThen tag it.")
    assert section(summarize(plain.messages), "Latest request") == [
        "> Bump the version. Then tag it."
    ]
