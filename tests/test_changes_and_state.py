"""Plain-list tests of the pure rules of issue #42: changes (ctxtool.core.changes) and where
the work stands, the user's words labelled (ctxtool.core.work_state)."""

from __future__ import annotations

from ctxtool.core.changes import (
    ADDED,
    DELETED,
    MODIFIED,
    RENAMED,
    Change,
    diff_stat_changes,
    git_status_changes,
    git_status_gist,
    is_directory,
    merged,
    normalise_path,
    patch_changes,
    reported_changes,
    shell_changes,
)
from ctxtool.core.work_state import (
    GoalSource,
    goal_of,
    is_one_off,
    is_rejection,
    issue_reference,
    overrides,
    reported_done,
    retired,
    stated_next,
    superseded,
)

# -- changes --------------------------------------------------------------------------------


def test_git_status_short_and_long():
    short = " M src/a.py\nD  old.py\nR  b.py -> c.py\n?? new.txt\n"
    assert git_status_changes(short) == [
        Change("src/a.py"),
        Change("old.py", DELETED),
        Change("c.py", RENAMED, "b.py"),
        Change("new.txt", ADDED),
    ]
    long = (
        "On branch main\nChanges to be committed:\n\trenamed:    x.py -> y.py\n"
        "\tdeleted:    z.py\n\tmodified:   w.py\n"
    )
    assert git_status_changes(long) == [
        Change("y.py", RENAMED, "x.py"),
        Change("z.py", DELETED),
        Change("w.py", MODIFIED),
    ]


def test_git_status_quoted_paths_are_unquoted():
    """git quotes a path with a space or non-ASCII bytes (core.quotePath): the quotes and
    octal escapes are gone, so the path merges with the same file from apply_patch."""
    short = ' M "a b.txt"\n?? "caf\\303\\251.py"\nR  "x y.py" -> "z w.py"\n'
    assert git_status_changes(short) == [
        Change("a b.txt"),
        Change("café.py", ADDED),
        Change("z w.py", RENAMED, "x y.py"),
    ]
    assert git_status_changes('\tdeleted:    "caf\\303\\251.py"\n') == [Change("café.py", DELETED)]


def test_git_status_malformed_quoted_paths_are_kept_as_written():
    """A quoted path whose closing quote is escaped is no C-quoted path (git never prints one):
    it is kept as written, never read as an empty or truncated path; bytes that are no UTF-8
    and a huge path read without an error."""
    assert git_status_changes(' M "\\"\n') == [Change('"\\"')]
    assert git_status_changes(' M "a\\"\n') == [Change('"a\\"')]
    assert git_status_changes(' M "a\\\\"\n') == [Change("a\\")]  # an escaped backslash
    assert git_status_changes('?? "x\\377.py"\n') == [Change("x\ufffd.py", ADDED)]
    [huge] = git_status_changes('?? "' + "\\303\\251" * 50_000 + '"\n')
    assert huge.path == "é" * 50_000


def test_shell_mv_into_a_directory():
    """mv (or git mv) of several files, or of one into a directory named with its slash,
    moves each into it under its own name."""
    assert shell_changes("mv a.py b.py c/") == [
        Change("c/a.py", RENAMED, "a.py"),
        Change("c/b.py", RENAMED, "b.py"),
    ]
    assert shell_changes("git mv src/x.py lib/") == [Change("lib/x.py", RENAMED, "src/x.py")]
    assert shell_changes("mv a.py b.py") == [Change("b.py", RENAMED, "a.py")]


def test_git_rm_cached_is_no_deletion():
    """git rm --cached untracks a file and leaves it on disk: no deletion; git rm and rm are."""
    assert shell_changes("git rm --cached secrets.env && git rm -r old/ && rm x.py") == [
        Change("old/", DELETED),
        Change("x.py", DELETED),
    ]


def test_diff_stat_with_renames():
    stat = (
        " src/{old => new}/mod.py | 4 ++--\n README.md              | 12 +++++++-----\n"
        " docs/a.md => docs/b.md | 0\n 3 files changed, 9 insertions(+), 7 deletions(-)\n"
    )
    assert diff_stat_changes(stat) == [
        Change("src/new/mod.py", RENAMED, "src/old/mod.py"),
        Change("README.md"),
        Change("docs/b.md", RENAMED, "docs/a.md"),
    ]


def test_shell_moves_and_removals_and_patches():
    assert shell_changes("git mv a.py b.py && rm -f c.txt") == [
        Change("b.py", RENAMED, "a.py"),
        Change("c.txt", DELETED),
    ]
    patch = (
        "*** Begin Patch\n*** Delete File: gone.py\n*** Update File: old.py\n"
        "*** Move to: new.py\n@@\n-x\n+y\n*** Add File: fresh.py\n+z\n*** End Patch"
    )
    assert patch_changes(patch) == [
        Change("gone.py", DELETED),
        Change("new.py", RENAMED, "old.py"),
        Change("fresh.py", ADDED),
    ]


def test_a_sub_agents_report_names_its_files():
    report = (
        "Done. I created `src/api/routes.py` and updated tests/test_routes.py.\n"
        "- `docs/api.md` — new\nBumped the version to 1.4.2 and removed legacy/shim.js"
    )
    paths = {c.path: c.kind for c in reported_changes(report)}
    assert paths == {
        "src/api/routes.py": ADDED,
        "tests/test_routes.py": MODIFIED,
        "docs/api.md": ADDED,
        "legacy/shim.js": DELETED,
    }


def test_one_path_form_and_directories():
    assert normalise_path("/home/u/proj/src/a.py", "/home/u/proj") == "src/a.py"
    assert normalise_path("./src//a.py") == "src/a.py"
    assert normalise_path("/etc/hosts", "/home/u/proj") == "/etc/hosts"
    changes = [Change("/home/u/proj/a.py"), Change("a.py"), Change("a.py", DELETED)]
    assert merged(changes, "/home/u/proj") == [Change("a.py", DELETED)]
    assert merged([Change("a.py"), Change("b.py", RENAMED, "a.py")]) == [
        Change("b.py", RENAMED, "a.py")
    ]
    assert is_directory("src/", []) and is_directory("src", ["src/a.py"])
    assert not is_directory("src/a.py", ["src/a.py"])


# -- where the work stands -------------------------------------------------------------------


def test_the_goal_is_never_a_placeholder_a_bare_url_or_a_rejected_quote():
    placeholder = GoalSource(command="/erk:plan-implement", arguments="(<title>)")
    assert goal_of(placeholder) == "/erk:plan-implement"
    planned = GoalSource(
        plan_title="Add session export", plan_number="#812", command="/erk:plan-implement"
    )
    assert goal_of(planned) == "Add session export (#812)"
    url = GoalSource(first_request="https://github.com/acme/tool/issues/42")
    assert goal_of(url) == "acme/tool#42"
    assert issue_reference("https://gitlab.com/a/b/merge_requests/7") == "a/b!7"
    quoted = (
        "> The capital of Australia is Sydney, the largest and best known city of the country.\n"
        "this is wrong, fix the geography quiz answers"
    )
    assert (
        goal_of(GoalSource(first_request=quoted)) == "this is wrong, fix the geography quiz answers"
    )


def test_next_steps_and_what_is_reported_done():
    assert stated_next("WP13 is merged. WP14 next.") == "WP14 next"
    assert stated_next("Tests pass. Next: wire the --json flag into export") == (
        "wire the --json flag into export"
    )
    # "I'm" with either apostrophe, after "next"; "now I'm" narrates and is no next step.
    assert stated_next("Installer done. Next I\u2019m exporting the session.") == (
        "exporting the session"
    )
    assert stated_next("Next, I am wiring the grant form") == "wiring the grant form"
    assert stated_next("Now I\u2019ll rerun the tests.") == "rerun the tests"
    assert stated_next("Now I'm reading the config.") is None
    assert reported_done("All done: the release is tagged and pushed.")
    assert not reported_done("WP13 is complete. WP14 next.")
    assert not reported_done("I am running the tests now")
    assert retired(
        ["Write the migration for call_id", "Update the README"],
        ["write the call_id migration", "run the benchmarks"],
    ) == [True, False]


def test_the_users_words_labelled():
    assert is_rejection("a custom tool nahhh")
    assert is_rejection("no, that's horrible")
    assert not is_rejection("use the custom tool")
    assert is_one_off("let's do a new release")
    assert is_one_off("commit and push it")
    assert not is_one_off("always run the linter before you commit")
    assert not is_one_off("never push to main")
    assert overrides("use tabs for indentation", "actually use spaces for indentation instead")
    assert overrides("push to origin after each fix", "don't push to origin after each fix")
    assert not overrides("use tabs for indentation", "write the changelog")
    assert superseded(
        ["use sqlite for the store", "write docs", "use mariadb for the store instead"]
    ) == [2, None, None]


def test_the_signals_goal_drops_a_placeholder_and_names_an_issue_url():
    from ctxtool.core.records import Message
    from ctxtool.core.span_facts import signals_of

    command = (
        "<command-message>erk:plan-implement</command-message>\n"
        "<command-name>/erk:plan-implement</command-name>\n<command-args>(<title>)</command-args>"
    )
    goal = signals_of([Message(1, 1, "user", command)]).goal
    assert goal is not None and "<title>" not in goal.text and goal.arguments is None
    url = signals_of([Message(1, 1, "user", "https://github.com/acme/tool/issues/42")]).goal
    assert url is not None and url.text == "acme/tool#42"


def test_a_skill_injection_and_claude_codes_continuation_notice_are_no_requests():
    """Issue #42: a ``<skill name=…>`` injection was quoted as the latest request, and "Continue
    the conversation from where it left off …" was copied from an earlier compaction record."""
    from ctxtool.core.evaluator.boilerplate import boilerplate_in
    from ctxtool.core.records import Message
    from ctxtool.core.sections import without_scaffolding
    from ctxtool.core.span_facts import UserText, signals_of, user_text_kind

    notice = (
        "Continue the conversation from where it left off without asking the user any further "
        "questions. Continue with the last task that you were asked to work on."
    )
    skill = '<skill name="pdf">\nUse pdfplumber to read the file.\n</skill>'
    messages = [
        Message(1, 1, "user", "convert report.pdf to markdown"),
        Message(2, 1, "user", skill),
        Message(3, 1, "user", notice),
    ]
    assert user_text_kind(messages[1]) is UserText.CONTEXT
    assert user_text_kind(messages[2]) is UserText.CONTEXT
    latest = signals_of(messages).latest_request
    assert latest is not None and latest.text == "convert report.pdf to markdown"
    assert "Continue the conversation" not in without_scaffolding(f"## Goal\nx\n{notice}")
    assert boilerplate_in(f"- {notice}") and boilerplate_in(f"> {skill}")


def test_a_redirection_a_glob_or_a_variable_is_no_changed_file():
    """Pi's refactor: ``rm … 2>/dev/null`` listed ``2>/dev/null (deleted)``, a loop's
    ``mv $f …`` and ``mv theme/* …`` a ``$f`` and a ``theme/*`` renamed, and ``mv
    utils/config.ts .`` a file called ``.``."""
    assert shell_changes("rm -f src/old.ts 2>/dev/null") == [Change("src/old.ts", DELETED)]
    assert shell_changes("rm x.log > out.txt") == [Change("x.log", DELETED)]
    assert shell_changes("for f in *.ts; do mv $f ../x/$f; done") == []
    assert shell_changes("mv src/theme/* src/modes/theme/") == []
    assert shell_changes("mv utils/config.ts .") == [
        Change("config.ts", RENAMED, "utils/config.ts")
    ]
    assert shell_changes("git mv a.py b.py 2>&1 | tail -3") == [Change("b.py", RENAMED, "a.py")]


def test_a_call_written_as_code_is_read_as_the_tool_it_calls():
    """Codex's code mode records each call as JavaScript (EdgeRunner: 135 ``exec`` calls): its
    commands, patches and changed files were read as nothing, so the summary listed no file
    and showed ``exec → ok`` as the current work."""
    from ctxtool.core.span_facts import command_run, modified_paths, unwrapped

    def code(source: str) -> dict:
        return {"id": "c1", "type": "function", "function": {"name": "exec", "arguments": source}}

    run = unwrapped(code('const r = await tools.exec_command({"cmd":"cargo test -q"}); text(r);'))
    assert run["function"]["name"] == "exec_command" and command_run(run) == "cargo test -q"
    patch = code(
        'const patch = "*** Begin Patch\\n*** Add File: src/lib.rs\\n+pub fn f() {}\\n'
        '*** End Patch\\n"; const r = await tools.apply_patch(patch); text(r);'
    )
    assert modified_paths(unwrapped(patch)) == ["src/lib.rs"]
    two = code("await tools.a({}); await tools.b({});")
    assert unwrapped(two) is two  # several tools: left as it is


def test_where_a_repository_stands_by_its_git_status():
    long = (
        "On branch main\n\nNo commits yet\n\nUntracked files:\n"
        '  (use "git add <file>..." to include in what will be committed)\n'
        "\tLICENSE\n\tindex.html\n\nnothing added to commit but untracked files present\n"
    )
    assert git_status_gist(long) == "on branch main; no commits yet; untracked: LICENSE, index.html"
    short = " M DECISIONS.md\nA  docs/zerion.md\nM  package.json\n?? docs/adr/0021.md\n"
    assert git_status_gist(short) == (
        "not staged: DECISIONS.md; staged: docs/zerion.md, package.json; untracked: docs/adr/0021.md"
    )
    assert git_status_gist("Everything up-to-date") is None
