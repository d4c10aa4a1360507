"""The line between the rules and the store, checked in fresh interpreters.

Pure rules import nothing of the store, the database layer, the summarizers or SQLAlchemy; the
store imports rules, never the services above it; and no module depends on an import order
(each module is imported first, alone, so a loop between modules fails whichever starts it).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import ctxtool

# The pure modules: plain records and rules, testable with plain lists (mypy is strict on them).
PURE_MODULES = [
    "ctxtool.core.errors",
    "ctxtool.core.tokens",
    "ctxtool.core.records",
    "ctxtool.core.context_size",
    "ctxtool.core.quality",
    "ctxtool.core.inspection",
    "ctxtool.core.validation",
    "ctxtool.core.status",
    "ctxtool.core.compaction_outcome",
    "ctxtool.core.plan",
    "ctxtool.core.calls",
    "ctxtool.core.prepare",
    "ctxtool.core.checkpoint_rules",
    "ctxtool.core.durations",
    "ctxtool.core",
    "ctxtool.core.outcomes",
    "ctxtool.core.changes",
    "ctxtool.core.work_state",
    "ctxtool.core.context_chart",
]
# What no pure module may load (a prefix names a package and everything in it).
NOT_PURE = ["sqlalchemy", "ctxtool.store", "ctxtool.db", "ctxtool.compaction.summarizers"]
# What the store may not load: the services that use it.
SERVICES = [
    "ctxtool.compaction.compactor",
    "ctxtool.compaction.batch",
    "ctxtool.compaction.summarizers",
    "ctxtool.importer",
    "ctxtool.export",
    "ctxtool.cli",
]


def loaded_after_import(module: str) -> set[str]:
    """The modules a fresh interpreter holds after importing ``module`` and nothing else."""
    code = f"import json, sys; import {module}; print(json.dumps(sorted(sys.modules)))"
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, f"importing {module} first fails:\n{result.stderr}"
    return set(json.loads(result.stdout.splitlines()[-1]))


def matching(loaded: set[str], prefixes: list[str]) -> list[str]:
    return sorted(m for m in loaded if any(m == p or m.startswith(p + ".") for p in prefixes))


@pytest.mark.parametrize("module", PURE_MODULES)
def test_a_pure_module_loads_no_store_database_or_summarizer(module):
    assert matching(loaded_after_import(module), NOT_PURE) == []


def test_the_store_loads_rules_and_no_service():
    loaded = loaded_after_import("ctxtool.store")
    assert (
        "sqlalchemy" in loaded and "ctxtool.core.context_size" in loaded
    )  # the check sees imports
    assert matching(loaded, SERVICES) == []


def all_modules() -> list[str]:
    """Every module of the package, found on disk (importing to find them would hide the
    ones that fail)."""
    root = Path(ctxtool.__file__).parent
    names = []
    for path in root.rglob("*.py"):
        parts = ("ctxtool", *path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        if parts[-1] != "__main__":
            names.append(".".join(parts))
    return sorted(names)


def test_every_module_imports_first_in_a_fresh_interpreter():
    """A loop between modules breaks the one that starts it (a name not defined yet), so each
    module is imported first: in one fresh interpreter, every ctxtool module is dropped from
    ``sys.modules`` before the next is imported alone (the libraries stay loaded: a loop is
    between ctxtool's own modules, and one interpreter per module cost a minute)."""
    modules = all_modules()
    assert "ctxtool.core.context_size" in modules and "ctxtool.store.reads" in modules
    code = """
import importlib, json, sys, traceback
failed = {}
for module in sys.argv[1:]:
    for name in [n for n in sys.modules if n == "ctxtool" or n.startswith("ctxtool.")]:
        del sys.modules[name]
    try:
        importlib.import_module(module)
    except Exception as exc:
        failed[module] = traceback.format_exception_only(exc)[-1].strip()
print(json.dumps(failed))
"""
    result = subprocess.run(
        [sys.executable, "-c", code, *modules], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout.splitlines()[-1]) == {}
