"""The checks scripts/test.sh runs stay aimed at the right code."""

from __future__ import annotations

import tomllib
from pathlib import Path

from .test_layering import PURE_MODULES

ROOT = Path(__file__).resolve().parents[1]


def test_mypy_is_strict_on_exactly_the_pure_modules():
    """A module test_layering proves pure is checked strictly by mypy, and only those: a rule
    added to one list and not the other would be either unproven or unchecked."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    [strict] = [
        o for o in config["tool"]["mypy"]["overrides"] if o.get("disallow_untyped_defs") is True
    ]
    assert sorted(strict["module"]) == sorted(PURE_MODULES)


def test_the_wheel_lists_every_package_of_the_source_tree():
    """setuptools installs only the packages pyproject.toml lists: one left out imports from a
    checkout (and an editable install) but not from `pip install .`, the README's first
    command (ctxtool.evaluation was left out so, and `ctxtool` failed on its first import)."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    listed = set(config["tool"]["setuptools"]["packages"])
    in_tree = {
        ".".join(init.parent.relative_to(ROOT).parts)
        for init in ROOT.glob("ctxtool/**/__init__.py")
    }
    assert in_tree - listed == set()
