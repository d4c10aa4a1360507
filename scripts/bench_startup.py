#!/usr/bin/env python3
"""Benchmark what a `ctxtool` process pays before it does anything (issue #44).

Each command runs as its own process, 5 times (``--runs``); the figure is the minimum CPU time (user +
system, from ``wait4``), the steadier measure on a loaded machine. Two baselines run in the
same loop: ``python -c 'import click'`` (what ``--version``, ``--help``, a group's ``--help``
and a Tab may cost, at most 1.5x) and ``python -c 'import sqlalchemy, pymysql, click'`` (what
``context show``, ``sessions list`` and ``migrate status`` on a counted store may cost, at
most 1.3x). The store is a fresh SQLite file: the session of examples/ imported, every count
stored (``tokens count --all``), compacted. ``--old DIR`` runs every command a second time
with the ctxtool source tree in DIR first on ``PYTHONPATH`` (e.g. a ``git worktree`` of an
earlier commit, its bytecode compiled), so old and new are measured in one run.
``--instructions`` counts the instructions each process runs instead (valgrind's cachegrind,
one run each, the same count within half a percent from run to run): on a machine other work
loads, CPU times move by a tenth from one run to the next and their ratios with them, where
the instructions do not.

Example: .venv/bin/python scripts/bench_startup.py
         .venv/bin/python scripts/bench_startup.py --old /tmp/old --markdown
         .venv/bin/python scripts/bench_startup.py --old /tmp/old --instructions
"""

from __future__ import annotations

import argparse
import compileall
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RUNS = 5
CLICK = "import click"
DRIVER = "import sqlalchemy, pymysql, click"
ENTRY = "import sys; from ctxtool.cli import main; main(sys.argv[1:], prog_name='ctxtool')"
# (label, arguments, baseline, at most this many times the baseline)
COMMANDS = [
    ("ctxtool --version", ["--version"], CLICK, 1.5),
    ("ctxtool --help", ["--help"], CLICK, 1.5),
    ("ctxtool context --help", ["context", "--help"], CLICK, 1.5),
    ("ctxtool con<TAB>", None, CLICK, 1.5),
    ("ctxtool completion bash", ["completion", "bash"], CLICK, 1.5),
    ("ctxtool context show 1", ["context", "show", "1"], DRIVER, 1.3),
    ("ctxtool sessions list", ["sessions", "list"], DRIVER, 1.3),
    ("ctxtool migrate status", ["migrate", "status"], DRIVER, 1.3),
]


def cpu_seconds(argv: list[str], env: dict[str, str]) -> float:
    """The CPU time (user + system) of one process running ``argv``."""
    # Run from / so that `python -c` (the current directory first on sys.path) imports the
    # tree PYTHONPATH names, not a checkout the script was started in.
    proc = subprocess.Popen(
        argv, env=env, cwd="/", stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    err = proc.stderr.read().decode() if proc.stderr else ""
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(argv[-3:])} failed ({proc.returncode}): {err.strip()}")
    return usage.ru_utime + usage.ru_stime


def instructions(argv: list[str], env: dict[str, str]) -> float:
    """The instructions (millions) one process running ``argv`` executes, counted by valgrind."""
    valgrind = shutil.which("valgrind")
    if valgrind is None:
        raise SystemExit("--instructions needs valgrind (apt-get install valgrind)")
    out = subprocess.run(
        [valgrind, "--tool=cachegrind", "--cache-sim=no", "--cachegrind-out-file=/dev/null"] + argv,
        env=env,
        cwd="/",
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    found = re.search(r"I\s+refs:\s+([\d,]+)", out.stderr)
    if out.returncode != 0 or found is None:
        raise SystemExit(f"{' '.join(argv[-3:])} failed ({out.returncode}): {out.stderr[-500:]}")
    return int(found.group(1).replace(",", "")) / 1e6


def command_argv(args: list[str] | None) -> tuple[list[str], dict[str, str]]:
    """The process for a command; ``None`` is a Tab after ``ctxtool con`` (bash)."""
    if args is None:
        return [sys.executable, "-c", ENTRY], {
            "_CTXTOOL_COMPLETE": "bash_complete",
            "COMP_WORDS": "ctxtool con",
            "COMP_CWORD": "1",
        }
    return [sys.executable, "-c", ENTRY, *args], {}


def prepare_store(url: str, env: dict[str, str]) -> None:
    """the session of examples/, every count stored, session 1 compacted."""
    for args in (
        ["migrate", "up"],
        ["import", str(ROOT / "examples")],
        ["tokens", "count", "--all"],
        ["compact", "1", "--force", "--summarizer", "extractive", "--keep-recent-tokens", "1000"],
    ):
        subprocess.run(
            [sys.executable, "-c", ENTRY, "--db", url, *args],
            env=env,
            check=True,
            capture_output=True,
        )


def measure(
    trees: dict[str, str | None], url: str, runs: int = RUNS, cost=cpu_seconds
) -> dict[str, dict[str, float]]:
    """{label: {tree: the least ``cost``}} (CPU seconds, or instructions), every command and
    baseline interleaved run by run."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("CTXTOOL_")}
    base["CTXTOOL_DATABASE_URL"] = url
    base.pop("PYTHONDONTWRITEBYTECODE", None)
    found: dict[str, dict[str, float]] = {}
    for _ in range(runs):
        for snippet in (CLICK, DRIVER):
            t = cost([sys.executable, "-c", snippet], base)
            found.setdefault(snippet, {})["-"] = min(found.get(snippet, {}).get("-", t), t)
        for label, args, _, _ in COMMANDS:
            for tree, path in trees.items():
                argv, extra = command_argv(args)
                env = {**base, **extra}
                if path is not None:
                    env["PYTHONPATH"] = path
                t = cost(argv, env)
                seen = found.setdefault(label, {})
                seen[tree] = min(seen.get(tree, t), t)
    return found


def report(
    found: dict[str, dict[str, float]], trees: list[str], markdown: bool, unit: str = "CPU s"
) -> bool:
    """Print the table; whether every new figure meets its target."""
    ok = True
    digits = 3 if unit == "CPU s" else 1
    head = ["command", *(f"{t} {unit}" for t in trees), "baseline", "new / baseline", "target"]
    rows = [
        [f"`python -c '{s}'`", *(f"{found[s]['-']:.{digits}f}" for _ in trees), "", "", ""]
        for s in (CLICK, DRIVER)
    ]
    for label, _, baseline, target in COMMANDS:
        ratio = found[label]["new"] / found[baseline]["-"]
        ok &= ratio <= target
        rows.append(
            [
                f"`{label}`",
                *(f"{found[label][t]:.{digits}f}" for t in trees),
                "click" if baseline == CLICK else "sqlalchemy+pymysql+click",
                f"{ratio:.2f}x",
                f"≤ {target}x",
            ]
        )
    if markdown:
        print("| " + " | ".join(head) + " |")
        print("|" + " --- |" * len(head))
        for row in rows:
            print("| " + " | ".join(row) + " |")
    else:
        widths = [max(len(str(r[i])) for r in [head, *rows]) for i in range(len(head))]
        for row in [head, *rows]:
            print("  ".join(str(c).ljust(w) for c, w in zip(row, widths)))
    return ok


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--old", type=Path, help="an earlier ctxtool source tree to compare")
    parser.add_argument("--markdown", action="store_true", help="a table for docs/benchmarks.md")
    parser.add_argument(
        "--runs", type=int, default=RUNS, help=f"runs of each command (default {RUNS})"
    )
    parser.add_argument(
        "--instructions",
        action="store_true",
        help="count each process's instructions under valgrind (one run each) instead of its CPU",
    )
    args = parser.parse_args()
    trees: dict[str, str | None] = {"new": str(ROOT)}
    if args.old is not None:
        trees = {"old": str(args.old.resolve()), **trees}
    for path in trees.values():
        compileall.compile_dir(Path(str(path)) / "ctxtool", quiet=1)
    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite:///{tmp}/bench.db"
        env = {k: v for k, v in os.environ.items() if not k.startswith("CTXTOOL_")}
        prepare_store(url, {**env, "PYTHONPATH": str(ROOT)})
        if args.instructions:
            found = measure(trees, url, 1, instructions)
        else:
            found = measure(trees, url, args.runs)
    unit = "M instructions" if args.instructions else "CPU s"
    return 0 if report(found, list(trees), args.markdown, unit) else 1


if __name__ == "__main__":
    sys.exit(main())
