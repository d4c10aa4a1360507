"""Issue 32 item 2: compressed transcripts and archives of a transcripts folder, read as
streams, with the identities of the files they were made from; and what an archive can do to a
reader (a member climbing out with ``..``, a decompression bomb, a truncated stream) refused as
one line naming the file, with nothing half-written."""

from __future__ import annotations

import gzip
import io
import json
import shutil
import tarfile
import tracemalloc
import zipfile
from collections import Counter
from pathlib import Path

import zstandard

from ctxtool.transcripts.compressed import MAX_RATIO, RATIO_FLOOR
from ctxtool.transcripts.discover import CountingStream, open_source
from ctxtool.transcripts.lines import read_transcript

from .conftest import TRANSCRIPTS

CODEX = TRANSCRIPTS / "codex" / "agent-sessions-codex-small.jsonl"
PI = TRANSCRIPTS / "pi" / "agent-sessions-pi-small.jsonl"
CHAT = b'{"role": "user", "content": "hi"}\n{"role": "assistant", "content": "yo"}\n'


def sessions(db) -> list[tuple]:
    return [
        (r["source_format"], r["source_id"], r["n"])
        for r in db.rows(
            "SELECT s.source_format, s.source_id, COUNT(m.id) AS n FROM agent_session s"
            " JOIN agent_message m ON m.session_id = s.session_id"
            " GROUP BY s.source_format, s.source_id ORDER BY s.source_id"
        )
    ]


def rows(result) -> list[dict]:
    return json.loads(result.stdout)


def _folder(root: Path) -> Path:
    """A transcripts folder as an agent leaves it."""
    folder = root / "transcripts"
    (folder / "sub").mkdir(parents=True)
    shutil.copy(CODEX, folder / "sub" / "rollout.jsonl")
    shutil.copy(PI, folder / "pi.jsonl")
    (folder / "chat.jsonl").write_bytes(CHAT)
    (folder / "notes.txt").write_text("not a transcript")
    return folder


def test_archives_and_compressed_files_keep_the_identities_of_their_files(db, cli, tmp_path):
    folder = _folder(tmp_path / "unpacked")
    plain = cli("--db", db.url, "import", "--json", folder)
    assert plain.exit_code == 0, plain.output
    before = sessions(db)
    assert len(before) == 3

    packed = tmp_path / "unpacked"
    with tarfile.open(packed / "transcripts.tar.gz", "w:gz") as tar:
        tar.add(folder, arcname="transcripts")
    with zipfile.ZipFile(packed / "transcripts.zip", "w", zipfile.ZIP_DEFLATED) as zf:
        for f in folder.rglob("*"):
            zf.write(f, f.relative_to(packed).as_posix())
    with open(folder / "chat.jsonl", "rb") as src, gzip.open(packed / "chat.jsonl.gz", "wb") as out:
        shutil.copyfileobj(src, out)
    (folder / "pi.jsonl.zst").write_bytes(zstandard.ZstdCompressor().compress(PI.read_bytes()))
    result = cli(
        "--db",
        db.url,
        "import",
        "--json",
        packed / "transcripts.tar.gz",
        packed / "transcripts.zip",
        folder / "pi.jsonl.zst",
    )
    assert result.exit_code == 0, result.output
    imported = rows(result)
    assert [r["file"] for r in imported[:3]] == [
        f"{packed}/transcripts.tar.gz/transcripts/chat.jsonl",
        f"{packed}/transcripts.tar.gz/transcripts/pi.jsonl",
        f"{packed}/transcripts.tar.gz/transcripts/sub/rollout.jsonl",
    ]
    assert len(imported) == 7 and all(r["added"] == 0 and r["present"] > 0 for r in imported)
    assert sessions(db) == before  # the same sessions: nothing new, nothing doubled

    # A compressed file is the file it was compressed from, beside it.
    (folder / "chat.jsonl").unlink()
    (packed / "chat.jsonl.gz").rename(folder / "chat.jsonl.gz")
    walked = cli("--db", db.url, "import", "--json", folder)
    assert walked.exit_code == 0, walked.output
    found = {Path(r["file"]).name: r for r in rows(walked)}
    assert set(found) == {"chat.jsonl.gz", "pi.jsonl", "pi.jsonl.zst", "rollout.jsonl"}
    assert found["chat.jsonl.gz"]["present"] == 2 and sessions(db) == before


def test_a_member_climbing_out_of_the_archive_is_refused_alone(db, cli, tmp_path):
    archive = tmp_path / "evil.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("../../outside.jsonl", CHAT)
        zf.writestr("/etc/abs.jsonl", CHAT)
        zf.writestr("fine.jsonl", CHAT)
        zf.writestr("../readme.txt", b"no transcript: never read, whatever its path")
    tar_archive = tmp_path / "evil.tar.gz"
    with tarfile.open(tar_archive, "w:gz") as tar:
        info = tarfile.TarInfo("a/../../up.jsonl")
        info.size = len(CHAT)
        tar.addfile(info, io.BytesIO(CHAT))
    result = cli("--db", db.url, "import", archive, tar_archive)
    assert result.exit_code == 4, result.output
    assert f"{archive}/../../outside.jsonl: archive member with a path that climbs out" in (
        result.output
    )
    assert f"{archive}/etc/abs.jsonl: archive member with an absolute path" in result.output
    assert f"{tar_archive}/a/../../up.jsonl: archive member with a path that climbs" in (
        result.output
    )
    assert "Traceback" not in result.output and "readme.txt" not in result.output
    assert [n for _, _, n in sessions(db)] == [2]  # fine.jsonl only
    assert not (tmp_path.parent / "outside.jsonl").exists()


def test_a_decompression_bomb_is_refused(db, cli, tmp_path):
    size = RATIO_FLOOR + 1024 * 1024
    line = b'{"role": "user", "content": "' + b"a" * (size - 40) + b'"}\n'
    bomb = tmp_path / "bomb.jsonl.gz"
    bomb.write_bytes(gzip.compress(line, compresslevel=9))
    assert len(line) > MAX_RATIO * bomb.stat().st_size  # the ratio of a bomb, not of a transcript
    zipped = tmp_path / "bomb.zip"
    with zipfile.ZipFile(zipped, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("ok.jsonl", CHAT)
        zf.writestr("huge.jsonl", line)
    result = cli("--db", db.url, "import", bomb, zipped)
    assert result.exit_code == 4, result.output
    assert f"{bomb}: decompresses to more than {MAX_RATIO} times its packed size" in result.output
    assert f"{zipped}: decompresses to more than {MAX_RATIO} times" in result.output
    assert [n for _, _, n in sessions(db)] == [2]


def test_a_truncated_or_corrupt_stream_names_the_file_and_writes_nothing(db, cli, tmp_path):
    whole = gzip.compress(CODEX.read_bytes())
    truncated = tmp_path / "cut.jsonl.gz"
    truncated.write_bytes(whole[: len(whole) // 2])
    corrupt = tmp_path / "corrupt.jsonl.zst"
    corrupt.write_bytes(b"\x28\xb5\x2f\xfd" + b"garbage" * 20)
    result = cli("--db", db.url, "import", truncated, corrupt)
    assert result.exit_code == 1, result.output
    assert f"{truncated}: truncated or corrupt compressed data" in result.output
    assert f"{corrupt}: truncated or corrupt compressed data" in result.output
    assert db.scalar("SELECT COUNT(*) FROM agent_message") == 0
    # A tar.gz broken off after its first member: that one is imported, the break reported.
    tar_path = tmp_path / "two.tar.gz"
    with tarfile.open(tar_path, "w:gz", compresslevel=1) as tar:
        for name, data in (("a/chat.jsonl", CHAT), ("a/rollout.jsonl", CODEX.read_bytes())):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    packed = tar_path.read_bytes()
    tar_path.write_bytes(packed[: len(packed) - 2000])
    result = cli("--db", db.url, "import", tar_path)
    assert result.exit_code == 4, result.output
    assert f"{tar_path}: truncated or corrupt compressed data" in result.output
    assert db.scalar("SELECT COUNT(*) FROM agent_message") == 2


def test_a_compressed_transcript_is_read_with_flat_memory(tmp_path):
    record = {"type": "message", "message": {"role": "user", "content": "x" * 2000}}
    path = tmp_path / "big.jsonl.gz"
    with gzip.open(path, "wb", compresslevel=1) as out:
        out.write(json.dumps({"type": "session", "version": 3, "id": "big", "cwd": "/"}).encode())
        out.write(b"\n")
        for i in range(20_000):  # 40 MB decompressed
            record["id"], record["parentId"] = f"e{i}", f"e{i - 1}" if i else None
            out.write(json.dumps(record).encode() + b"\n")
    tracemalloc.start()
    try:
        with open_source(str(path)) as source:
            lines = CountingStream(source.stream, size=source.size)
            transcript = read_transcript(str(path), lines, None)
            count = Counter(type(r).__name__ for r in transcript.records)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert count == {"SourceMessage": 20_000}
    assert peak < 12 * 1024 * 1024, peak  # the file is 40 MB; records are read one by one
