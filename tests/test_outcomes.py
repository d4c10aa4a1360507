"""Outcomes keyed on their target (ctxtool.core.outcomes), on plain lists (issue #42 item 1)."""

from __future__ import annotations

from ctxtool.core.outcomes import (
    Run,
    command_target,
    is_non_error,
    outcomes,
    output_failed,
    remedy_named,
    reported_failure,
    runs_remedy,
    said_failed,
    script_result,
    target_of,
    targets_done,
)


def bash(command: str, failed: bool = False, error: str = "", turn: int = 0) -> Run:
    return Run("Bash", command, failed, error=error, turn=turn)


def test_a_test_run_fixed_by_another_flag_is_resolved():
    runs = [
        bash("cd app && celery -A app worker --pool=prefork", True, "WorkerLostError"),
        bash("uv run pytest tests/test_tasks.py -x", True, "worker crashed"),
        bash("uv run pytest tests/test_tasks.py -x -p no:xdist --pool=threads"),
    ]
    [celery, pytest] = outcomes(runs)
    assert not celery.fixed
    assert pytest.fixed and "--pool=threads" in (pytest.fix() or "")


def test_a_rebase_conflict_is_resolved_by_rebase_continue():
    runs = [
        bash("git rebase origin/main", True, "CONFLICT (content): Merge conflict in a.py"),
        bash("git checkout --theirs a.py"),
        bash("git add a.py && GIT_EDITOR=true git rebase --continue"),
    ]
    [rebase] = outcomes(runs)
    assert rebase.fixed_by == runs[2]


def test_an_edit_refused_before_a_read_is_a_resolved_retry():
    edit = Run("Edit", "Edit src/a.py", True, "src/a.py", "File has not been read yet.")
    runs = [
        edit,
        Run("Read", "Read src/a.py", False, "src/a.py"),
        Run("Edit", "Edit src/a.py", False, "src/a.py"),
    ]
    [retried] = outcomes(runs)
    assert retried.retry and retried.fixed_by == runs[1]
    # not retried: it stays an open error
    [open_one] = outcomes([edit])
    assert not open_one.fixed and not open_one.retry


def test_stale_build_output_fixed_by_building_another_package():
    runs = [
        bash("cd packages/web && npm run build", True, "error TS2305: Module has no export"),
        bash("cd packages/core && npm run build"),
    ]
    [build] = outcomes(runs)
    assert build.fixed


def test_a_search_that_found_nothing_an_abort_and_an_exploratory_miss_are_no_errors():
    assert is_non_error(bash("rg -n foo src", True, ""), [])
    assert is_non_error(bash("make deploy", True, "[Request interrupted by user]"), [])
    miss = bash("ls ~/.config/app", True, "ls: cannot access '~/.config/app': No such file")
    assert is_non_error(miss, [bash("ls ~/.local/share/app")])
    assert not is_non_error(miss, [])  # nothing found it elsewhere: it stays
    # a look in a later turn is no alternative the agent tried for it
    assert not is_non_error(miss, [bash("ls ~/.local/share/app", turn=1)])


def test_different_targets_do_not_fix_each_other():
    runs = [
        bash("git push origin main", True, "rejected: non-fast-forward"),
        bash("git status"),
        bash("curl -I https://example.com/a", True, "HTTP/2 404"),
        bash("curl -I https://example.com/b"),
    ]
    assert [o.fixed for o in outcomes(runs)] == [False, False]


def test_targets():
    assert command_target("bash -lc 'cd /x && python -m pytest -q tests/a.py'") == "test:pytest"
    assert command_target("npm test -- --watch=false") == "test:npm"
    assert command_target("pnpm run build:web") == "build:pnpm"
    assert command_target("cargo build --release") == "build:cargo"
    assert command_target("git -C repo commit -m 'x'") == "git:commit"
    assert command_target("git rebase --continue") == "git:rebase"
    assert command_target("curl -sI https://a.example/x?y=1") == "url:a.example/x"
    assert (
        command_target("FOO=1 timeout 60 python scripts/run.py --fast") == "python:scripts/run.py"
    )
    assert target_of(Run("Write", "Write a.py", False, "a.py")) == "file:a.py"


def test_a_patch_retried_on_its_file_is_a_retry_a_search_exit_code_no_error():
    patch = "apply_patch *** Begin Patch *** Update File: render.py @@ -a +b *** End Patch"
    failed = Run("shell", patch, True, "render.py", "error: Failed to find expected lines")
    again = Run("shell", patch.replace("-a", "-c"), False, "render.py")
    assert target_of(failed) == "file:render.py"
    assert [(o.retry, o.fixed_by) for o in outcomes([failed, again])] == [(True, again)]
    grep = bash('grep -A 5 "a\\|b" src/x.ts', True, "Command exited with code 1")
    assert outcomes([grep]) == []
    assert outcomes([bash("sleep 5", True, "Command aborted")]) == []


def test_a_json_output_that_says_it_failed_gives_its_reasons():
    said = '{\n  "success": false,\n  "error_type": "session-id-required",\n  "message": "No id"\n}'
    assert reported_failure(said) == "session-id-required | No id"
    assert reported_failure('{"uploaded": false, "reason": "push_session_failed"}') == (
        "push_session_failed"
    )
    assert reported_failure('{"error": "not found"}') == "not found"
    assert reported_failure('{"ok": false}') == '{"ok": false}'
    for fine in ('{"success": true, "event": "ended"}', '{"error": null}', '{"dirty": false}',
                 '{"reason": "cached"}', "[1, 2]", "not json {", ""):  # fmt: skip
        assert reported_failure(fine) is None, fine


def test_a_command_group_s_commands_are_targets_of_their_own_and_or_true_is_no_step():
    assert command_target("erk exec upload-impl-session --session-id x 2>/dev/null || true") == (
        "erk:exec upload-impl-session"
    )
    assert command_target("gh pr create --fill") == "gh:pr create"
    assert command_target("gh pr view 12") == "gh:pr view"
    assert command_target("python scripts/run.py fast") == "python:scripts/run.py"
    assert command_target("ruff check .") == "ruff:check"
    upload = Run("Bash", "erk exec upload-impl-session || true", True, error="push_session_failed")
    other = Run("Bash", "erk exec impl-signal ended || true", False)
    assert [o.fixed for o in outcomes([upload, other])] == [False]


def test_a_code_mode_result_says_how_its_script_ended_and_its_output_says_the_rest():
    ran = "Script completed\nWall time 1.4 seconds\nOutput:\n\n   Checking core\nerror[E0599]: no"
    assert script_result(ran) == ("completed", None, "\n   Checking core\nerror[E0599]: no")
    assert script_result("Script running with cell ID 24\nWall time 10.0 seconds\nOutput:\n")[
        :2
    ] == (
        "running",
        "24",
    )
    assert script_result("Script failed\nWall time 0.1 seconds\nOutput:\n\nScript error:\nx")[
        0
    ] == ("failed")
    assert script_result("exit code 0") is None
    for failed in ("error[E0599]: the method", "src/App.tsx(23,25): error TS2339: Property",
                   "Diff in /x/lib.rs:3:", "curl: (7) Failed to connect", "npm error code 2",
                   "test result: FAILED. 1 passed; 2 failed"):  # fmt: skip
        assert output_failed("Compiling x\n" + failed), failed
    assert output_failed('{"success": false}')
    for fine in ("warning: spurious network error (3 tries remaining)", "Finished `dev`",
                 "no error here", "let e = error(x);"):  # fmt: skip
        assert not output_failed(fine), fine


def test_a_chain_that_succeeded_fixes_each_of_its_steps():
    chain = Run("shell", "cargo fmt --all && cargo clippy -- -D warnings && cargo test", False)
    assert targets_done(chain) == {"test:cargo", "cargo:fmt", "cargo:clippy"}
    clippy = Run("shell", "cargo fmt --all && cargo clippy -- -D warnings", True, error="error: x")
    assert [o.fixed_by for o in outcomes([clippy, chain])] == [chain]
    either = Run("shell", "make lint || true", False)
    assert targets_done(either) == {"build:make"}


def test_a_script_run_through_any_shell_has_the_script_s_target():
    curl = "curl -fsSL https://example.org/setup.sh | bash"
    assert command_target(f'bash -lc "{curl}"') == "url:example.org/setup.sh"
    wrapped = f"& 'C:\\Program Files\\Git\\bin\\bash.exe' -lc \"{curl}\""
    assert command_target(wrapped) == "url:example.org/setup.sh"
    # the first run under WSL's missing bash, fixed by Git Bash running the same script
    runs = [bash(f'bash -lc "{curl}"', True, "execvpe(/bin/bash) failed"), bash(wrapped)]
    [failure] = outcomes(runs)
    assert failure.fixed_by == runs[1]
    assert command_target("publish x") == "publish:x"  # a program ending in "sh" is no shell


def test_an_exploratory_look_fixed_on_its_target_is_a_failure_and_a_silent_miss_none():
    sandbox = "execution error: CreateProcessWithLogonW failed: 1056"
    look = bash("Get-Content -Raw SKILL.md", True, sandbox)
    runs = [look, bash("Get-ChildItem -Force"), bash("Get-Content -Raw SKILL.md")]
    [failure] = outcomes(runs)
    assert failure.fixed_by == runs[2]  # the same look, later fine
    # a PowerShell look that missed and said nothing: no error to carry
    silent = bash("Get-ChildItem -Recurse specs -ErrorAction SilentlyContinue", True, "")
    assert is_non_error(silent, [bash("git config --get user.name")])


def test_a_custom_tool_says_it_failed_and_the_remedy_it_names_fixes_it():
    """A custom tool reports its failure in its text (no error flag): an error mark, "Error:"
    or a first line ending "failed."; the remedy its error names is the failure's fix."""
    fetch = (
        "Obscura not available and HTTP fallback failed.\n\n🔗 https://a.example/post\n"
        "⚠️ Fetch failed: fetch failed\n\nURL queued. Call `batch_extract_failed` to process"
    )
    assert said_failed(fetch)
    assert said_failed('❌ Could not parse "https://a.example" via citation.js')
    assert said_failed("Error: no such note") and said_failed("Failed to create the note")
    assert not said_failed("📄 **Results**\nFetch failed on one mirror, the other answered.")
    assert not said_failed("The errors are fixed: 3 tests failed before, none now.")
    assert remedy_named(fetch) == "batch_extract_failed"
    assert remedy_named("Cannot find module. Run npm install first.") == "npm"
    assert remedy_named("Provide: title, authors, year.") == ""
    runs = [
        Run("fetch_url", "fetch_url https://a.example/post", True, remedy="batch_extract_failed"),
        Run("fetch_url", "fetch_url https://b.example/x", True, remedy="batch_extract_failed"),
        Run("batch_extract_failed", "batch_extract_failed", False),
        Run("cite", "cite https://a.example/post", True, error="Could not parse"),
        Run("cite", "cite https://a.example/post", False),
    ]
    first, second, cite = outcomes(runs)
    assert first.fixed_by == second.fixed_by == runs[2]
    assert cite.fixed_by == runs[4]
    assert not runs_remedy(runs[4], "batch_extract_failed")


def test_a_flag_s_number_is_not_what_a_command_acts_on():
    """``grep -A 3 "a" x.ts`` and ``grep -A 3 "b" y.ts`` look for different things: the
    number after ``-A`` is no target they share, so one does not fix the other."""
    assert command_target('grep -A 3 "function paint" wrap.ts') == "grep:function paint"
    assert command_target("head -n 20 notes.md") == "head:notes.md"
    runs = [
        bash('grep -A 3 "function paint" wrap.ts', True, "grep: wrap.ts: No such file"),
        bash('grep -A 3 "class Loader" loader.ts', turn=1),
    ]
    [miss] = outcomes(runs)
    assert not miss.fixed
