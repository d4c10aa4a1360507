"""Shell completion of SESSION from the configured store, through the real completion
protocol (the environment a shell's completion script sets) and the real entry point."""

from __future__ import annotations

import os
import subprocess
import sys

import sqlalchemy as sa

from ctxtool.db.schema import agent_session

SESSIONS = [  # id, source id, title
    (1, "0a5e1c67-aaaa", "first"),
    (12, "0a5e99ff-bbbb", "twelfth"),
    (3, "fe5e1c67-cccc", "third"),
]


def complete(words: str, shell: str = "bash", env: dict | None = None) -> list[str]:
    """What ``ctxtool`` offers for the last of ``words`` (a trailing space: a new word)."""
    parts = words.split(" ")
    environ = {
        k: v for k, v in os.environ.items() if k not in ("CTXTOOL_DATABASE_URL", "DATABASE_URL")
    }
    environ.update(
        _CTXTOOL_COMPLETE=f"{shell}_complete",
        COMP_WORDS=words,
        # fish's script passes the word itself, bash's and zsh's its index
        COMP_CWORD=parts[-1] if shell == "fish" else str(len(parts) - 1),
        **(env or {}),
    )
    done = subprocess.run(
        [sys.executable, "-m", "ctxtool"],
        env=environ,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0 and done.stderr == "", done.stderr
    return [line for line in done.stdout.splitlines() if line]


def _add_sessions(db) -> None:
    with db.engine.begin() as conn:
        for session_id, source_id, title in SESSIONS:
            conn.execute(
                sa.insert(agent_session).values(
                    session_id=session_id, source_id=source_id, title=title
                )
            )


def test_session_ids_and_source_ids_complete_from_the_store(db, tmp_path):
    _add_sessions(db)
    assert complete(f"ctxtool --db {db.url} context show ") == [
        "plain,12",
        "plain,3",
        "plain,1",
    ]
    assert complete(f"ctxtool --db {db.url} validate 1") == ["plain,12", "plain,1"]
    assert complete(f"ctxtool --db {db.url} tokens count 0a5e") == [
        "plain,0a5e1c67-aaaa",
        "plain,0a5e99ff-bbbb",
    ]
    # --db after the command, and the URL from the environment, are the store too.
    assert complete(f"ctxtool context show --db {db.url} fe") == ["plain,fe5e1c67-cccc"]
    env = {"CTXTOOL_DATABASE_URL": db.url}
    assert complete("ctxtool context checkpoints 3", env=env) == ["plain,3"]
    # The commands that take several sessions complete each of them.
    assert complete("ctxtool sessions delete 1 3", env=env) == ["plain,3"]
    assert complete("ctxtool sessions archive fe", env=env) == ["plain,fe5e1c67-cccc"]
    # zsh and fish show the title beside the value.
    assert complete(f"ctxtool --db {db.url} context show 0a5e9", shell="zsh") == [
        "plain",
        "0a5e99ff-bbbb",
        "twelfth",
    ]
    assert complete(f"ctxtool --db {db.url} context show 3", shell="fish") == ["plain,3\tthird"]


def test_a_store_that_cannot_answer_completes_nothing(mysql_empty_db, tmp_path):
    missing = tmp_path / "none.db"
    assert complete(f"ctxtool --db {missing} context show ") == []
    assert not missing.exists()  # completion never creates the file
    assert complete(f"ctxtool --db {mysql_empty_db.url} context show ") == []  # no tables yet
    assert complete("ctxtool --db mysql://root@127.0.0.1:1/x context show ") == []
    assert complete("ctxtool --db sqlite://bad context show 1") == []
