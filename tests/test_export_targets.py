"""`context export -o PATH` writes as a plain write would: through a symlink to its target,
keeping an existing file's mode, and straight into a device or a FIFO (which cannot be renamed
over), while a regular file is still replaced whole or not at all."""

from __future__ import annotations

import os
import stat
import threading

from ctxtool.db.schema import agent_message, agent_session
from ctxtool.export import render_markdown
from ctxtool.store.reads import SessionHistory, Store


def _session(db) -> str:
    with db.engine.begin() as conn:
        conn.execute(agent_session.insert().values(session_id=1, model="gpt-4o"))
        conn.execute(
            agent_message.insert(),
            [
                {"session_id": 1, "role": ("user", "assistant")[i % 2], "content": f"line {i}"}
                for i in range(40)
            ],
        )
    return "1"


def _expected(db) -> str:
    return render_markdown(SessionHistory(Store(db.engine), 1).view())


def test_export_keeps_the_mode_of_the_file_it_replaces(db, cli, tmp_path):
    """A private export stays private: the temporary file's mode was replaced by the
    umask default, so a 0600 file became world-readable."""
    sid = _session(db)
    (tmp_path / "out").mkdir()
    out = tmp_path / "out" / "secret.md"
    out.write_text("old", encoding="utf-8")
    out.chmod(0o600)
    result = cli("--db", db.url, "context", "export", sid, "-o", out)
    assert result.exit_code == 0, result.output
    assert out.read_text(encoding="utf-8") == _expected(db)
    assert stat.S_IMODE(out.stat().st_mode) == 0o600
    assert sorted(os.listdir(out.parent)) == ["secret.md"]


def test_export_through_a_symlink_writes_its_target(db, cli, tmp_path):
    """The link stays a link and its target holds the export (the rename replaced the link
    with a regular file and left the target as it was)."""
    sid = _session(db)
    (tmp_path / "out" / "real").mkdir(parents=True)
    target = tmp_path / "out" / "real" / "target.md"
    target.write_text("", encoding="utf-8")
    target.chmod(0o640)
    link = tmp_path / "out" / "link.md"
    link.symlink_to(os.path.join("real", "target.md"))
    result = cli("--db", db.url, "context", "export", sid, "-o", link)
    assert result.exit_code == 0, result.output
    assert link.is_symlink() and os.readlink(link) == os.path.join("real", "target.md")
    assert target.read_text(encoding="utf-8") == _expected(db)
    assert stat.S_IMODE(target.stat().st_mode) == 0o640
    assert sorted(os.listdir(target.parent)) == ["target.md"]


def test_export_to_a_dangling_symlink_creates_its_target(db, cli, tmp_path):
    sid = _session(db)
    link = tmp_path / "link.md"
    link.symlink_to("new.md")
    result = cli("--db", db.url, "context", "export", sid, "-o", link)
    assert result.exit_code == 0, result.output
    assert link.is_symlink()
    assert (tmp_path / "new.md").read_text(encoding="utf-8") == _expected(db)


def test_export_to_a_null_device_leaves_it_a_device(db, cli, tmp_path):
    """`-o /dev/null` writes into the device. The test uses a null device of its own (the same
    device numbers as /dev/null, made with mknod, which the suite's root may do): pointed at the
    real one, a regression would replace the machine's /dev/null with a regular file."""
    sid = _session(db)
    (tmp_path / "out").mkdir()
    null = tmp_path / "out" / "null"
    os.mknod(null, stat.S_IFCHR | 0o666, os.stat("/dev/null").st_rdev)
    result = cli("--db", db.url, "context", "export", sid, "-o", null)
    assert result.exit_code == 0, result.output
    assert f"wrote {null} (markdown, {len(_expected(db).encode())} bytes)" in result.output
    assert stat.S_ISCHR(os.stat(null).st_mode)
    assert os.stat(null).st_rdev == os.stat("/dev/null").st_rdev
    assert sorted(os.listdir(null.parent)) == ["null"]


def test_export_to_a_fifo_streams_into_it(db, cli, tmp_path):
    """A FIFO is written straight into, and its reader gets the whole export; the FIFO stays."""
    sid = _session(db)
    (tmp_path / "out").mkdir()
    fifo = tmp_path / "out" / "pipe"
    os.mkfifo(fifo)
    # Both ends open before the export, so neither side blocks on open() and the reader sees
    # the end only once we close our writing end (it would hang if the FIFO were replaced).
    reading = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    os.set_blocking(reading, True)
    writing = os.open(fifo, os.O_WRONLY)
    received: list[bytes] = []

    def read() -> None:
        with os.fdopen(reading, "rb") as pipe:
            received.append(pipe.read())

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        result = cli("--db", db.url, "context", "export", sid, "-o", fifo)
    finally:
        os.close(writing)
        reader.join()
    assert result.exit_code == 0, result.output
    assert received == [_expected(db).encode()]
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)
    assert sorted(os.listdir(fifo.parent)) == ["pipe"]
