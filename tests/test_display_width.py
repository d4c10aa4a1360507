"""Human output fits the terminal in columns, not characters (issue #44): a CJK ideograph takes
two columns, a combining mark none. Every table and prose command is run at COLUMNS=80 through
the `ctxtool` console script, on a store whose session title, messages, summary and transcript
file name are Chinese and Japanese; each line must take at most 80 columns, tables must stay
aligned, and wrapping must lose no word. The columns are measured here from Unicode's East
Asian Width, apart from the code under test."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import unicodedata
from pathlib import Path

from ctxtool.core.cells import display_width, pad, shorten
from ctxtool.terminal import clip, wrap

from .builders import LIMITS

CTXTOOL = Path(sys.executable).with_name("ctxtool")
ZH = "请修复结账总额的四舍五入错误，并在修改之前运行测试。这个问题在计算税费的时候出现，需要检查所有相关的文件和函数。"
JA = "テストを実行してから修正を確認してください。計算の丸め誤差が原因です。"
SUMMARY = (
    "## 目标\n修复结账总额的四舍五入错误，在所有相关文件中检查税费计算，并且运行全部测试以确认修改"
    "没有破坏其他功能。\n\n## 已完成\n- 阅读了 商店/税费.py 和 商店/结账.py 两个文件，找到了错误的"
    "位置和原因，准备修改。"
)


def columns(line: str) -> int:
    """Terminal columns of ``line``: wide and fullwidth characters 2, combining marks and
    format characters 0, the rest 1."""
    width = 0
    for ch in line:
        if unicodedata.combining(ch) or unicodedata.category(ch) in ("Mn", "Me", "Cf"):
            continue
        width += 2 if unicodedata.east_asian_width(ch) in ("W", "F") else 1
    return width


def _pi_transcript(path: Path) -> None:
    """A Pi session in Chinese and Japanese, compacted once by the runtime (a CJK summary)."""
    lines: list[dict] = [
        {"type": "session", "version": 3, "id": "019e19b4-eb48-746a-aa6b-8dfcfa3795cc"},
    ]
    parent = None
    for i in range(40):
        role = "user" if i % 2 == 0 else "assistant"
        message = {
            "role": role,
            "content": [
                {"type": "text", "text": f"第{i}轮：" + (ZH if role == "user" else JA) * 3}
            ],
        }
        if role == "assistant":
            message |= {"provider": "pi-fixture", "model": "模型-测试", "stopReason": "stop"}
        entry = {"type": "message", "id": f"m{i:07d}", "parentId": parent, "message": message}
        lines.append(entry)
        parent = entry["id"]
        if i == 20:
            lines.append(
                {
                    "type": "compaction",
                    "id": "c0000001",
                    "parentId": parent,
                    "summary": SUMMARY,
                    "firstKeptEntryId": "m0000016",
                    "tokensBefore": 5000,
                }
            )
            parent = "c0000001"
    stamp = "2026-05-12T01:02:27.673Z"
    path.write_text(
        "".join(json.dumps({**x, "timestamp": stamp}, ensure_ascii=False) + "\n" for x in lines),
        encoding="utf-8",
    )


def ctxtool(url: str, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "COLUMNS": "80", "CTXTOOL_DATABASE_URL": url, "PYTHONIOENCODING": "utf-8"}
    env.pop("NO_COLOR", None)
    return subprocess.run(
        [str(CTXTOOL), *args], env=env, capture_output=True, text=True, timeout=300
    )


def _fits(result: subprocess.CompletedProcess, command: str) -> None:
    assert "Traceback" not in result.stderr, result.stderr
    for name, text in (("stdout", result.stdout), ("stderr", result.stderr)):
        wide = [
            f"{columns(line)}: {line}"
            for line in text.splitlines()
            if columns(line) > 80 and not line.startswith("Error: ")  # an error stays whole
        ]
        assert not wide, f"{command} ({name}):\n" + "\n".join(wide)


def _aligned(table: str) -> None:
    """Each column of a ``simple`` table starts at the same terminal column on every row, the
    one its rule's dashes start at, after a gap."""
    lines = table.splitlines()
    rule = lines[1]
    starts = [i for i, ch in enumerate(rule) if ch == "-" and i > 0 and rule[i - 1] == " "]
    for line in lines[2:]:
        at, begun = 0, set()
        for i, ch in enumerate(line):
            if at in starts and ch != " " and line[i - 1] == " ":
                begun.add(at)
            at += columns(ch)
        assert begun == set(starts), (starts, line)


def test_every_table_and_prose_command_fits_80_columns_in_cjk(sqlite_db, tmp_path):
    transcript = tmp_path / "会话-结账总额四舍五入错误修复-长标题测试.jsonl"
    _pi_transcript(transcript)
    url = sqlite_db.url
    imported = ctxtool(url, "import", str(transcript))
    assert imported.returncode == 0, imported.stderr
    _fits(imported, "import")
    assert "测试.jsonl" in imported.stdout

    commands = [
        ["sessions", "list"],
        ["context", "show", "1"],
        ["context", "checkpoints", "1", "--details"],
        ["context", "diff", "1"],
        ["context", "diff", "1", "--side-by-side"],
        ["context", "trace", "1", "四舍五入"],
        ["search", "四舍五入"],
        ["eval", "1"],
        ["tokens", "count", "--all"],
        ["tokens", "report"],
        ["validate", *LIMITS[:2]],
        ["compact", "--all", "--dry-run", "--summarize", "--show-summary", *LIMITS],
    ]
    shown = {}
    for command in commands:
        result = ctxtool(url, *command)
        assert result.returncode in (0, 4), (command, result.stderr)
        _fits(result, " ".join(command))
        shown[command[0] + " " + command[1]] = result.stdout

    listed = shown["sessions list"]
    _aligned(listed)
    assert "第0轮：请修复" in listed and "模型-测试" in listed
    show = shown["context show"]
    assert "".join(show.split()).count("".join(SUMMARY.split("\n\n")[0].split())) == 1  # whole
    assert any(columns(line) > 70 for line in show.splitlines())  # the width is used
    assert "四舍五入" in shown["search 四舍五入"]


def test_display_width_and_the_cuts_count_columns():
    assert display_width("abc") == 3
    assert display_width("四舍五入") == 8
    assert display_width("e\u0301") == 1  # e and a combining acute accent
    assert display_width("ＡＢ") == 4  # fullwidth forms
    assert display_width("ｱｲ") == 2  # halfwidth katakana
    assert shorten("四舍五入错误", 7) == "四舍五…"
    assert shorten("四舍五入错误", 7, from_left=True) == "…入错误"
    assert shorten("四舍五入", 8) == "四舍五入"
    assert columns(clip("修复" * 40, 11)) <= 11
    assert pad("四舍", 6) == "四舍  "


def test_wrapping_cjk_breaks_by_columns_and_keeps_every_character():
    text = "- 第0轮：" + ZH * 3 + " hello world " + JA
    lines = wrap(text, 30).splitlines()
    assert all(columns(line) <= 30 for line in lines)
    assert all(columns(line) >= 27 for line in lines[:-2])  # full lines, not half-empty ones
    assert all(line.startswith("  ") for line in lines[1:])  # under the list item's text
    assert "".join(line.strip() for line in lines).replace(" ", "") == text.replace(" ", "")
    # ASCII text wraps as textwrap does.
    words = "the quick brown fox jumps over the lazy dog " * 5

    assert wrap(words, 24, "") == "\n".join(
        textwrap.wrap(words, 24, break_long_words=True, break_on_hyphens=False)
    )
