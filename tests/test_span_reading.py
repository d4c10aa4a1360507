"""What the summarizer reads from a span (#42 items 1-4), each rule on plain lists and on a
real shared transcript span: the files a shell prints are read files, a runtime's mid-turn
words do not end the turn, an edit at the cut says what it writes, a failure among the last
batch of calls stays in view, a report's list belongs to the line that names it, and the
options the user picked from the agent's questions are decisions."""

from __future__ import annotations

import json
from pathlib import Path

from ctxtool.compaction.summarizers.span_notes import read_span, reported, turn_ended
from ctxtool.core.outcomes import alternative_remedy, shell_steps
from ctxtool.core.records import calls_of
from ctxtool.core.sections import (
    CURRENT_WORK,
    DECISIONS,
    ERRORS,
    FILES_READ,
    NEXT_STEP,
    OPEN_TASKS,
)
from ctxtool.core.span_facts import (
    command_steps,
    invoked_steps_left,
    loaded_not_written,
    question_answers,
    signals_of,
    steps_not_run,
    working_branch,
)
from ctxtool.core.touched_files import files_touched, shell_reads

from .keyed_spans import extractive_summary, keyed_span_named, section
from .test_span_facts import Span


def _span(name: str, tmp_path: Path):
    return keyed_span_named(name, tmp_path)


# -- the files a shell prints are files read -----------------------------------------------------


def test_a_shell_line_that_prints_a_file_reads_it():
    assert shell_reads("sed -n '1,220p' app/api/[id]/route.ts") == ["app/api/[id]/route.ts"]
    assert shell_reads("nl -ba docs/A.md | sed -n 1,80p && tail -5 README.md") == [
        "docs/A.md",
        "README.md",
    ]
    assert shell_reads(r"Get-Content -Raw docs\arch\Plan.md") == [r"docs\arch\Plan.md"]
    assert shell_reads("head -n 40 src/a.rs") == ["src/a.rs"]
    # an edit, a glob, a variable, a device, a pipe's later stage: no file read
    for command in ("sed -i 's/a/b/' x.py", "cat *.py", "cat $F", "cat /dev/null", "ls | head"):
        assert shell_reads(command) == [], command
    calls = [{"id": "1", "function": {"name": "exec_command", "arguments": '{"cmd": "cat a.py"}'}}]
    assert files_touched(calls) == (["a.py"], [])


def test_gildore_s_reads_through_the_shell_are_its_files_read(tmp_path):
    span = _span("codex--gildore-arena-codex-session-v0.130", tmp_path)
    read, _ = files_touched(calls_of(span.summarized))
    assert any(p.endswith("Narrative.md") for p in read)
    listed = " ".join(section(extractive_summary(span), FILES_READ))
    assert "browser-session" in listed and "third-touch" in listed


# -- a runtime's mid-turn words do not end the turn ----------------------------------------------


def test_words_the_runtime_marks_as_said_mid_turn_end_no_turn():
    s = Span()
    s.user("Install it and prepare the grant.")
    s.call("shell", "Exit code: 0\nOutput:\ndone", command="make install")
    s.add("assistant", "The installer completed.", details={"phase": "commentary"})
    assert not turn_ended(s.messages)
    s.messages[-1].details = {"phase": "final_answer"}
    assert turn_ended(s.messages)


def test_valdyum_s_span_ends_mid_turn_with_its_failed_export_in_view(tmp_path):
    span = _span("codex--Valdyum-Labs-codex-session", tmp_path)
    assert not read_span(span.summarized).turn_ended
    summary = extractive_summary(span)
    assert not any("ended its turn" in i for i in section(summary, NEXT_STEP))
    [line] = [i for i in section(summary, CURRENT_WORK) if "export-session.sh" in i]
    assert line.endswith("→ failed (still open)")


# -- a failure among the last batch of calls stays in view ---------------------------------------


def test_an_open_failure_of_the_last_batch_is_current_work():
    s = Span()
    s.user("Export the session and read the docs.")
    s.add("assistant", "Exporting the transcript, then reading the docs.")
    s.call("shell", "Exit code: 1\nOutput:\nfatal error", exit_code=1, command="./export.sh .")
    for n in range(4):
        s.call("shell", "Exit code: 0\nOutput:\ntext", command=f"cat doc{n}.md")
    work = read_span(s.messages).current_work
    assert "- shell `./export.sh .` → failed (still open)" in work
    s.call("shell", "Exit code: 0\nOutput:\nexported", command="./export.sh .")  # fixed
    assert not any("still open" in line for line in read_span(s.messages).current_work)


# -- an edit at the cut says what it writes ------------------------------------------------------


def test_an_edit_at_the_cut_says_the_names_it_brings_in():
    s = Span()
    s.user("Add proof tracking.")
    s.call(
        "Edit",
        "The file src/types.rs has been updated successfully.",
        file_path="src/types.rs",
        old_string="pub struct Intent {\n    pub id: u64,\n}",
        new_string="pub struct Intent {\n    pub id: u64,\n    pub message_id: u64,\n}",
    )
    [line] = [x for x in read_span(s.messages).current_work if x.startswith("- Edit")]
    assert "(writes `message_id`)" in line


def test_edgerunner_s_last_patch_names_what_it_was_wiring(tmp_path):
    span = _span("codex--edgerunner-codex-session", tmp_path)
    work = " ".join(section(extractive_summary(span), CURRENT_WORK))
    assert "TxLineProofClient" in work and "txline.rs" in work


# -- a report's list belongs to the line that names it -------------------------------------------


def test_the_list_a_naming_line_introduces_is_part_of_the_report():
    report = (
        "Done. Single `index.html` with:\n\n- **Pixel art font** (Press Start 2P)\n"
        "- **Generate button** with an animation\n\nEnjoy the game night."
    )
    assert reported(report, 900) == (
        "Done. Single `index.html` with:; Pixel art font (Press Start 2P); "
        "Generate button with an animation"
    )
    # a list under a line that names nothing is still left out
    assert reported("Here is what I did:\n- a nicer font\n- a button", 900) == ""


def test_apanloco_s_first_report_keeps_what_its_single_file_holds(tmp_path):
    summary = extractive_summary(
        _span("claude-code--apanloco-random-session--sfx-randomness", tmp_path)
    )
    assert "Single `index.html`" in summary and "Press Start 2P" in summary


# -- the options the user picked from the agent's questions are decisions ------------------------


def test_the_options_the_user_picked_are_decisions():
    s = Span()
    s.user("Plan the engine.")
    question = {"header": "Capital", "id": "capital", "question": "What capital policy?"}
    answers = {"answers": {"capital": {"answers": ["Zero required (Recommended)"]}}}
    s.call("request_user_input", json.dumps(answers), questions=[question])
    s.call(
        "AskUserQuestion",
        'User has answered your questions: "Which database?"="SQLite". You can now continue.',
        questions=[{"question": "Which database?"}],
    )
    assert question_answers(s.messages) == [
        ("Capital: Zero required", 3, True),
        ("Which database?: SQLite", 5, True),
    ]
    decisions = [d.text for d in signals_of(s.messages).decisions]
    assert decisions == ["Chosen: Capital: Zero required", "Chosen: Which database?: SQLite"]


def test_an_answer_that_names_no_option_is_no_decision():
    question = {"id": "k", "header": "Capital", "question": "How much capital?"}
    s = Span()
    s.user("Plan the launch.")
    answers = {"answers": {"k": {"answers": [None, {"x": 1}, 7, "Zero required"]}}}
    s.call("request_user_input", json.dumps(answers), questions=[question])
    assert question_answers(s.messages) == [("Capital: Zero required", 3, True)]


def test_edgerunner_s_answered_questions_are_its_decisions(tmp_path):
    decisions = " ".join(
        section(extractive_summary(_span("codex--edgerunner-codex-session", tmp_path)), DECISIONS)
    )
    assert "Capital: Zero required" in decisions and "Venue Access: No access yet" in decisions


# -- a failure the agent got past another way is no open error ------------------------------------


def test_a_quoted_script_s_semicolon_ends_no_step():
    line = "cd /x && npx tsx -e \"import { a } from './c.js'; console.log(a());\" | head"
    assert shell_steps(line) == [
        ["cd", "/x"],
        ["npx", "tsx", "-e", "import { a } from './c.js'; console.log(a());"],
    ]
    assert shell_steps("a && b; c | d > e") == [["a"], ["b"], ["c"]]


def test_a_failure_the_agent_tried_another_way_past_is_fixed_by_that_way():
    assert alternative_remedy("npx tsx -e 'x'", "Let me try a different approach:") == "tsx"
    assert alternative_remedy("npx tsx -e 'x'", "The module is missing.") == ""
    s = Span()
    s.user("Check the paths.")
    s.call("bash", "Error: Cannot find module './c.js'", exit_code=1, command="npx tsx -e 'x'")
    s.add("assistant", "Let me try a different approach:")
    s.call("bash", "usage: cli", exit_code=0, command="npx tsx src/cli.ts --help")
    [failure] = signals_of(s.messages).failures
    assert failure.fixed and failure.fixed_by == "npx tsx src/cli.ts --help"
    s.messages[3].content = "The module is missing."  # no other way: it stays open
    [failure] = signals_of(s.messages).failures
    assert not failure.fixed


def test_another_way_needs_its_words_and_the_same_target_or_the_next_command():
    # words that change no way: "a method" the agent adds, "alternatively" a look aside
    assert alternative_remedy("cargo build", "I'll add a method `area` to Shape.") == ""
    assert alternative_remedy("python train.py", "Alternatively, let me check the GPU.") == ""
    assert alternative_remedy("python train.py", "Let me use another method.") == "python"
    s = Span()
    s.user("Fix the build.")
    s.call("bash", "error[E0599]: no method named `area`", exit_code=101, command="cargo build")
    s.add("assistant", "The trait is missing a method. I'll add a method `area` to Shape.")
    s.call("bash", "", exit_code=0, command="cargo fmt")
    [failure] = signals_of(s.messages).failures
    assert not failure.fixed
    s = Span()
    s.user("Train it.")
    s.call(
        "bash", "RuntimeError: CUDA out of memory", exit_code=1, command="python train.py --bs 64"
    )
    s.add("assistant", "Out of memory. Let me try a different approach: first check the GPU.")
    s.call("bash", "ok", exit_code=0, command="ls checkpoints")
    s.call("bash", "True", exit_code=0, command="python -c 'import torch; print(1)'")
    [failure] = signals_of(s.messages).failures
    assert not failure.fixed  # another program came first; python -c works on no train.py
    s.call("bash", "loss 0.1", exit_code=0, command="python train.py --bs 16")
    [failure] = signals_of(s.messages).failures
    assert failure.fixed_by == "python train.py --bs 16"  # the same script: the other way


def test_pi_s_path_check_that_another_run_got_past_is_not_called_open(tmp_path):
    span = _span("pi--before-compaction--old-files-removed", tmp_path)
    [failure] = [f for f in signals_of(span.summarized).failures if "tsx -e" in f.command][:1]
    assert failure.fixed and "tsx" in (failure.fixed_by or "")
    errors = section(extractive_summary(span), ERRORS)
    assert not [e for e in errors if "Cannot find module" in e and "still open" in e]


# -- where the work stands: the command's steps not yet run, the branch --------------------------

EXPANSION = """# /ship

Ship the branch.

### Step 1: Set up

```bash
tool setup --plan 12
```

### Step 2: Work through the plan

Each phase in turn.

### Step 3: Signal ended

```bash
tool signal ended --id=x || true
```

### Step 4: Submit

```bash
tool pr submit
```
"""


def test_the_invoked_command_s_steps_after_the_last_one_run_are_still_to_do():
    steps = command_steps(EXPANSION)
    assert [t for t, _ in steps] == [
        "Step 1: Set up",
        "Step 2: Work through the plan",
        "Step 3: Signal ended",
        "Step 4: Submit",
    ]
    assert steps[1][1] == [] and steps[3][1] == ["tool pr submit"]
    ran = ["tool setup --plan 12 --json"]
    assert steps_not_run(steps, ran) == [
        "Step 3: Signal ended (`tool signal ended --id=x || true`)",
        "Step 4: Submit (`tool pr submit`)",
    ]
    assert steps_not_run(steps, ran + ["tool pr submit"]) == []
    assert steps_not_run(steps, []) == []  # no step run: nothing says where the run is
    s = Span()
    s.user("<command-name>/ship</command-name>\n<command-args>12</command-args>")
    s.user(EXPANSION, is_meta=True)
    s.call("Bash", '{"branch": "feat/ship-12"}', exit_code=0, command="tool setup --plan 12")
    notes = read_span(s.messages)
    assert [t.text for t in notes.tasks or ()] == steps_not_run(steps, ran)
    assert "- (on branch `feat/ship-12`)" in notes.current_work


def test_a_step_runs_by_its_words_not_by_a_substring():
    steps = command_steps(
        "### Step 1: Build\n```bash\nnpm run build\n```\n### Step 2: Deploy\n```bash\n"
        "make deploy\n```\n### Step 3: Notify\n```bash\nls\n```\n"
    )
    # `false` holds "ls", `cmake --build .` holds "make": neither ran a step
    assert steps_not_run(steps, ["npm run build", "false", "cmake --build ."]) == [
        "Step 2: Deploy (`make deploy`)",
        "Step 3: Notify (`ls`)",
    ]
    assert steps_not_run(steps, ["npm run build", "bash -lc 'cd /x && make deploy'"]) == [
        "Step 3: Notify (`ls`)"
    ]


def test_a_command_the_user_called_off_leaves_no_steps():
    s = Span()
    s.user("<command-name>/ship</command-name>\n<command-args>12</command-args>")
    s.user(EXPANSION, is_meta=True)
    s.call("Bash", "ok", exit_code=0, command="tool setup --plan 12")
    assert invoked_steps_left(s.messages)  # the run is under way
    s.user("Stop, don't ship this. Just fix the typo in README.md instead.")
    s.call("Edit", "ok", file_path="README.md", old_string="teh", new_string="the")
    assert invoked_steps_left(s.messages) == []
    assert not any("Submit" in t.text for t in read_span(s.messages).tasks or ())


def test_the_branch_the_work_is_on_is_the_last_one_made_or_named():
    s = Span()
    s.user("Start the feature.")
    s.call("Bash", "Switched to a new branch 'feat/a'", command="git checkout -b feat/a")
    assert working_branch(s.messages) == "feat/a"
    s.call("Bash", '{"branch": "other/b"}', command="cat session.json")
    assert working_branch(s.messages) == "feat/a"  # a file read may name any branch
    s.call("Bash", "On branch main\nnothing to commit", command="git status")
    assert working_branch(s.messages) is None  # back on the default branch: no feature one


def test_a_merged_and_deleted_branch_is_no_working_branch():
    s = Span()
    s.user("Make the fix on a branch, then merge it into main.")
    s.call("Bash", "Switched to a new branch 'fix/typo'", command="git checkout -b fix/typo")
    s.call("Bash", "[fix/typo 1a2b3c] Fix typo", command="git commit -am 'Fix typo'")
    s.call("Bash", "Switched to branch 'main'", command="git checkout main")
    assert working_branch(s.messages) is None
    assert not any("(on branch" in line for line in read_span(s.messages).current_work)
    s.call("Bash", "Switched to branch 'fix/typo'", command="git checkout fix/typo")
    assert working_branch(s.messages) == "fix/typo"
    s.call("Bash", "Deleted branch fix/typo (was 1a2b3c).", command="git branch -D fix/typo")
    assert working_branch(s.messages) is None  # a deleted branch holds no work


def test_a5c478e1_mid_implementation_says_its_steps_left_and_its_branch(tmp_path):
    span = _span("claude-code--a5c478e1-0d31-46d4-9fd6-3b6b203b3752--mid-implementation", tmp_path)
    summary = extractive_summary(span)
    tasks = " ".join(section(summary, OPEN_TASKS))
    assert "Step 12: Submit PR (`erk pr submit`)" in tasks and "upload-impl-session" in tasks
    assert "impl-signal started" not in tasks  # step 5 ran
    work = " ".join(section(summary, CURRENT_WORK))
    assert "(on branch `plnd/add-session-push-fetch-02-28-1911`)" in work


# -- a file the written ones load, not written yet, is still to do -------------------------------


def test_a_file_a_new_page_loads_that_the_span_never_wrote_is_still_to_do():
    page = '<html><script src="https://cdn/vue.js"></script><script src="app.js"></script></html>'
    s = Span()
    s.user("Make the todo app.")
    s.call("Write", "File created.", file_path="/w/index.html", content=page)
    s.call("Write", "File created.", file_path="/w/notes.md", content="import x from './doc.js'")
    assert loaded_not_written(s.messages) == [("app.js", "/w/index.html")]  # no CDN, no doc
    [task] = read_span(s.messages).tasks or []
    assert task.text == "Write `app.js` (/w/index.html loads it; not written yet)"
    assert task.status == "pending"
    s.call("Write", "File created.", file_path="/w/app.js", content="createApp({})")
    assert loaded_not_written(s.messages) == []


def test_a_result_whose_call_came_before_the_span_is_read_as_a_result():
    """A span may begin with a tool result whose call was summarized earlier (a fold's chunk,
    a cut's neighbour): its text is what a result said, never an error (a KeyError once)."""
    s = Span()
    s.add("tool", "app.js is in /w already", tool_call_id="before-the-span")
    page = '<script src="app.js"></script><script src="store.js"></script>'
    s.call("Write", "File created.", file_path="/w/index.html", content=page)
    assert loaded_not_written(s.messages) == [("store.js", "/w/index.html")]
    assert read_span(s.messages).tasks


def test_openhands_html_only_says_its_app_js_is_still_to_write(tmp_path):
    span = _span("openai-chat--OpenHands-basic_gui_mode--html-only", tmp_path)
    tasks = section(extractive_summary(span), OPEN_TASKS)
    assert any("`app.js`" in t and "not written yet" in t for t in tasks)
    # the whole run wrote it: nothing left
    whole = _span("openai-chat--OpenHands-basic_gui_mode", tmp_path)
    assert not loaded_not_written(whole.summarized)


def test_a_backslash_in_a_bash_line_is_no_windows_path():
    line = "sed -n '1,40p' src/app.py && rg 'a\\|b' src"
    assert shell_reads(f'bash -lc "{line}"') == ["src/app.py"]
    call = {
        "id": "1",
        "function": {"name": "shell", "arguments": json.dumps({"command": ["bash", "-lc", line]})},
    }
    assert files_touched([call]) == (["src/app.py"], [])
    # PowerShell's read of a drive path is a read of that file
    assert shell_reads(r"Get-Content C:\Users\me\app\main.py -TotalCount 20") == [
        r"C:\Users\me\app\main.py"
    ]
    assert shell_reads(r"type C:\work\notes.txt") == [r"C:\work\notes.txt"]


def test_a_retry_with_no_target_says_no_empty_on():
    s = Span()
    s.user("Patch it.")
    for _ in range(3):
        s.call("apply_patch", "Error: invalid hunk at line 3", error=True)
    s.call("apply_patch", "Success. Updated the following files:\nM a.py")
    s.add("assistant", "Patched.")
    lines = [line for line in read_span(s.messages).errors if "refused" in line]
    assert lines and not any("(on )" in line or "(on ," in line for line in lines), lines


def test_a_technology_a_report_names_is_no_changed_file():
    from ctxtool.core.changes import reported_changes

    said = "I've successfully created a fully functional TODO app using Next.js with Node.js."
    assert reported_changes(said) == []
    assert [c.path for c in reported_changes("Created `src/next.config.js` using npm.")] == [
        "src/next.config.js"
    ]
    assert [c.path for c in reported_changes("Created App.js with a counter.")] == ["App.js"]


def test_a_list_item_s_marker_is_read_by_one_pattern():
    from ctxtool.compaction.summarizers.span_notes import _naming_lines

    lines = ["Single `index.html` with:", "• a header", "- a footer", "## Next steps"]
    assert _naming_lines(lines) == ["Single `index.html` with:", "a header", "a footer"]


def test_decisions_come_in_order_and_a_question_keeps_its_last_answer():
    s = Span()
    s.user("Plan the engine.")
    asked = [{"question": "Which database?"}]
    said = 'User has answered your questions: "Which database?"="{}". You can now continue.'
    s.call("AskUserQuestion", said.format("SQLite"), questions=asked)
    s.user("We will use Rust for the engine.")
    s.call("AskUserQuestion", said.format("Postgres"), questions=asked)
    decisions = [d.text for d in signals_of(s.messages).decisions]
    assert not any("SQLite" in d for d in decisions)
    assert decisions[-1] == "Chosen: Which database?: Postgres"
    assert any("Rust" in d for d in decisions[:-1])  # the request's decision came first
