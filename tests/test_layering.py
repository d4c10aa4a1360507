"""The layers, checked on the import graph and in fresh interpreters.

The package is drawn in layers, each importing only the layers below it: ``ctxtool.core`` (the
rules: the standard library, orjson and tiktoken, nothing else), ``ctxtool.db``, ``ctxtool.store``
(core and db only), the services above them, and the CLI on top (``ctxtool.cli`` with its
helpers). The graph is read from the source (every import statement, those inside functions
too); the rules are also imported in a fresh interpreter, to see what they really load; and no
module depends on an import order (each module is imported first, alone, so a loop between
modules fails whichever starts it).
"""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from pathlib import Path

import ctxtool

ROOT = Path(ctxtool.__file__).parent
# The rules, named as pyproject.toml's strict mypy section names them (tests/test_checks.py).
PURE_MODULES = ["ctxtool.core", "ctxtool.core.*"]
# What a rule may import besides the standard library and ctxtool.core.
CORE_LIBRARIES = {"orjson", "tiktoken"}
# The command line: the click commands, and what renders and prints for them only (context_text
# and export: a context as text, a table, JSON, Markdown, HTML or JSONL, fitted to the terminal).
CLI = [
    "ctxtool.__main__",
    "ctxtool.cli",
    "ctxtool.context_text",
    "ctxtool.escapes",
    "ctxtool.export",
    "ctxtool.output",
    "ctxtool.terminal",
]
# Bottom to top; a module belongs to the first layer whose prefix names it, and every module
# the layers do not name is a service. The configuration file's reader (the standard library
# and core's errors alone) sits with the rules: the database URL's defaults are read from it by
# db.urls and by the CLI's root without loading the database layer.
LAYERS = [
    ("core", [PURE_MODULES[0], "ctxtool.config_file"]),
    ("db", ["ctxtool.db"]),
    ("store", ["ctxtool.store"]),
]
# Arrows that still run against the layers, each to be removed with its fix: the test fails
# when one is gone as well as when a new one appears.
KNOWN_EXCEPTIONS: set[tuple[str, str]] = set()
# The database families, as SQLAlchemy and the servers name them.
DIALECT_NAMES = {"sqlite", "mysql", "mariadb", "tidb"}


def module_name(path: Path) -> str:
    parts = ("ctxtool", *path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def all_modules() -> list[str]:
    """Every module of the package, found on disk (importing to find them would hide the
    ones that fail)."""
    return sorted(module_name(path) for path in ROOT.rglob("*.py") if path.stem != "__main__")


def imports_of(path: Path) -> set[str]:
    """The modules ``path`` imports, absolute (``from . import x`` names ``package.x``)."""
    module = module_name(path)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                source = ".".join([*base, *([node.module] if node.module else [])])
            else:
                source = node.module or ""
            found.add(source)
            found.update(f"{source}.{alias.name}" for alias in node.names)
    return found


def graph() -> dict[str, set[str]]:
    """Each module's imports: ctxtool's own modules, and the top names of everything else."""
    modules = set(all_modules())
    edges = {}
    for path in ROOT.rglob("*.py"):
        names = imports_of(path)
        edges[module_name(path)] = {n for n in names if n in modules} | {
            n.split(".")[0] for n in names if n.split(".")[0] != "ctxtool"
        }
    return edges


def layer_of(module: str) -> int:
    if any(module == p or module.startswith(p + ".") for p in CLI):
        return len(LAYERS) + 1
    for rank, (_, prefixes) in enumerate(LAYERS):
        if any(module == p or module.startswith(p + ".") for p in prefixes):
            return rank
    return len(LAYERS)  # a service


def test_the_rules_import_the_standard_library_orjson_tiktoken_and_each_other():
    allowed = set(sys.stdlib_module_names) | CORE_LIBRARIES
    wrong = sorted(
        (module, target)
        for module, targets in graph().items()
        if layer_of(module) == 0
        for target in targets
        if target != "ctxtool.core"
        and not target.startswith("ctxtool.core.")
        and target not in allowed
        and target != "ctxtool"
    )
    assert wrong == []


def test_no_arrow_runs_up_the_layers():
    """core < db < store < services < cli: the store imports core and db, services never the
    CLI, and nothing below imports what is above it."""
    up = {
        (module, target)
        for module, targets in graph().items()
        for target in targets
        if target.startswith("ctxtool.") and layer_of(target) > layer_of(module)
    }
    assert up == KNOWN_EXCEPTIONS


def test_the_graph_sees_the_imports():
    edges = graph()
    assert "ctxtool.core.records" in edges["ctxtool.core.context_size"]
    assert "sqlalchemy" in edges["ctxtool.store.reads"]
    assert layer_of("ctxtool.store.reads") == 2 and layer_of("ctxtool.importer") == 3
    assert layer_of("ctxtool.output") == layer_of("ctxtool.cli.root") == 4


def loaded_after_import(module: str) -> set[str]:
    """The modules a fresh interpreter holds after importing ``module`` and nothing else."""
    code = f"import json, sys; import {module}; print(json.dumps(sorted(sys.modules)))"
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, f"importing {module} first fails:\n{result.stderr}"
    return set(json.loads(result.stdout.splitlines()[-1]))


def test_the_rules_load_nothing_of_the_store_the_network_or_the_command_line():
    rules = [m for m in all_modules() if layer_of(m) == 0]
    code = f"import {', '.join(rules)}"
    loaded = loaded_after_import(code.removeprefix("import "))
    ours = sorted(m for m in loaded if m.startswith("ctxtool.") and layer_of(m) != 0)
    assert ours == []
    assert not loaded & {"sqlalchemy", "click", "tabulate", "openai", "pymysql"}


def test_the_store_loads_rules_and_no_service():
    store = [m for m in all_modules() if m.startswith("ctxtool.store.")]
    loaded = loaded_after_import(", ".join(store))
    assert "sqlalchemy" in loaded and "ctxtool.core.context_size" in loaded  # the check sees
    services = sorted(m for m in loaded if m.startswith("ctxtool.") and layer_of(m) > 2)
    assert services == []


def test_no_dialect_name_is_compared_outside_the_database_layer():
    compared = re.compile(
        r"""(\.name\s*[!=]=\s*["'](sqlite|mysql|mariadb)["'])"""
        r"""|(["'](sqlite|mysql|mariadb)["']\s*[!=]=\s*\w+(\.\w+)*\.name)"""
    )
    found = [
        f"{path.relative_to(ROOT)}:{n}"
        for path in ROOT.rglob("*.py")
        if path.relative_to(ROOT).parts[0] != "db"
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if compared.search(line)
    ]
    assert found == []


# A dialect named outside ctxtool/db, each to go with its fix: the test fails when one is gone
# as well as when a new one appears.
KNOWN_DIALECT_NAMES: set[tuple[str, str]] = set()
# A database URL spelled out (``sqlite:///...``, ``mysql+pymysql://...``) names its dialect too;
# the one outside db/ is the default URL, which the configuration file's reader holds so that
# the CLI's root reads it without loading the database layer.
URL_SCHEME = re.compile(r"(sqlite|mysql|mariadb)(\+\w+)?://")
DEFAULT_URL = {("config_file.py", "'sqlite:///ctxtool.db'")}


def _docstrings(tree: ast.Module) -> set[int]:
    bodies = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)
    return {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, bodies)
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }


def dialect_names(path: Path) -> set[str]:
    """Where ``path`` names a database family: a string that is a dialect's or a server
    product's name or begins a database URL (docstrings aside), or an import of SQLAlchemy's dialect packages or of
    db's dialect classes (an isinstance test on them compares names by other means)."""
    tree = ast.parse(path.read_text())
    docstrings = _docstrings(tree)
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            text = node.value.strip().lower()
            if id(node) not in docstrings and (text in DIALECT_NAMES or URL_SCHEME.match(text)):
                found.add(repr(node.value))
        elif isinstance(node, ast.ImportFrom):
            names = {alias.name for alias in node.names}
            module = node.module or ""
            if module.startswith("sqlalchemy.dialects") or "dialects" in names:
                found.add(f"import {module}")
            if module.endswith("dialects") and names & {"MySQL", "SQLite"}:
                found.add(f"import {sorted(names & {'MySQL', 'SQLite'})}")
        elif isinstance(node, ast.Import):
            found.update(f"import {a.name}" for a in node.names if ".dialects" in a.name)
    return found


def test_no_dialect_is_named_outside_the_database_layer():
    """The database families are the database layer's to tell apart: everything above asks
    ``dialect_of`` what it needs, and never spells a dialect."""
    named = {
        (str(path.relative_to(ROOT)), what)
        for path in ROOT.rglob("*.py")
        if path.relative_to(ROOT).parts[0] != "db"
        for what in dialect_names(path)
    }
    assert named == KNOWN_DIALECT_NAMES | DEFAULT_URL
    db = ROOT / "db" / "dialects.py"
    in_db = dialect_names(db)  # the check finds what it looks for where it belongs
    assert {"'mysql'", "'sqlite'", "'MariaDB'"} <= in_db
    assert any(w.startswith("import sqlalchemy.dialects") for w in in_db), in_db
    assert "'sqlite:///'" in dialect_names(ROOT / "db" / "urls.py")  # sqlite_url_for's f-string


def test_no_module_name_is_used_twice():
    stems = [path.stem for path in ROOT.rglob("*.py") if path.stem != "__init__"]
    stems += [path.name for path in ROOT.iterdir() if (path / "__init__.py").exists()]
    stems += [path.parent.name for path in ROOT.rglob("*/*/__init__.py")]
    assert sorted({s for s in stems if stems.count(s) > 1}) == []


def test_every_module_imports_first_in_a_fresh_interpreter():
    """A loop between modules breaks the one that starts it (a name not defined yet), so each
    module is imported first: in one fresh interpreter, every ctxtool module is dropped from
    ``sys.modules`` before the next is imported alone (the libraries stay loaded: a loop is
    between ctxtool's own modules)."""
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


def test_the_imports_the_docs_show_still_work():
    """The rules moved into ctxtool.core; the names the docs import from the packages they
    left (``ctxtool.evaluation``, ``ctxtool.compaction``) are re-exported there."""
    docs = ROOT.parent / "docs"
    shown = sorted(
        {
            line.strip()
            for path in [*docs.glob("*.md"), ROOT.parent / "README.md"]
            for line in path.read_text().splitlines()
            if re.match(r"\s*from ctxtool[\w.]* import [\w, ]+$", line)
        }
    )
    assert any("ctxtool.evaluation import" in line for line in shown)
    result = subprocess.run(
        [sys.executable, "-c", "\n".join(shown)], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr


# Functions that still take an engine or a (store, conn) pair, each to be turned into a Store
# method or a (conn, ...) function with its fix: the test fails when one is gone as well as when
# a new one appears. None is left.
KNOWN_ENGINE_TAKERS: set[str] = set()
# Kept under the names earlier docs showed, each one statement: return Store(engine).<itself>.
DOCUMENTED_WRAPPERS = {
    "ctxtool.store.acknowledgement.mark_over_window_ok",
    "ctxtool.store.search.search",
}


def _takes_the_engine(function: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """An ``engine`` parameter, one annotated as an Engine, or a store with a connection."""
    args = [*function.args.posonlyargs, *function.args.args, *function.args.kwonlyargs]
    names = {a.arg for a in args}
    annotated = any(a.annotation and "Engine" in ast.unparse(a.annotation) for a in args)
    return "engine" in names or annotated or {"store", "conn"} <= names


def _is_a_thin_wrapper(function: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """``return Store(engine).<the function's own name>(...)``, after a docstring."""
    body = function.body[1:] if ast.get_docstring(function) else function.body
    if len(body) != 1 or not isinstance(body[0], ast.Return):
        return False
    call = body[0].value
    return (
        isinstance(call, ast.Call)
        and isinstance(call.func, ast.Attribute)
        and call.func.attr == function.name
        and ast.unparse(call.func.value) == "Store(engine)"
    )


def engine_takers(source: str, module: str) -> dict[str, bool]:
    """{qualified name: whether it is a thin wrapper} of each function of ``module`` that takes
    an engine or a (store, conn) pair, besides Store's methods and the constructors of objects
    that hold an engine for their life, as Store does (a Compactor, an Importer, a Migrator)."""
    found = {}

    def visit(node: ast.AST, owner: list[str]) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ClassDef):
                visit(child, [*owner, child.name])
            elif isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                exempt = owner[-1:] == ["Store"] or bool(owner) and child.name == "__init__"
                if _takes_the_engine(child) and not exempt:
                    found[".".join([module, *owner, child.name])] = _is_a_thin_wrapper(child)
                visit(child, [*owner, child.name])

    visit(ast.parse(source), [])
    return found


def test_the_store_is_asked_one_way():
    """docs/development.md, "Asking the store": a call that opens its own connection or
    transaction is a Store method; a query in the caller's transaction is a function of
    (conn, ...). Nothing outside the database layer takes an engine or a (store, conn) pair
    besides Store, the objects that hold an engine, and the documented wrappers."""
    found: dict[str, bool] = {}
    for path in ROOT.rglob("*.py"):
        if path.relative_to(ROOT).parts[0] != "db":
            found.update(engine_takers(path.read_text(), module_name(path)))
    wrappers = {name for name, thin in found.items() if thin}
    assert wrappers == DOCUMENTED_WRAPPERS
    assert set(found) - wrappers == KNOWN_ENGINE_TAKERS


def test_the_store_check_sees_what_it_looks_for():
    """The check above finds an engine parameter, an Engine annotation and a (store, conn)
    pair, and tells a thin wrapper from a function that does the work itself."""
    source = '''
def by_name(engine, n): pass
def by_type(bind: "Engine | Connection"): pass
def pair(store, session_id, conn=None): pass
def fine(conn, store_id): pass
def wrapper(engine, x):
    """Kept."""
    return Store(engine).wrapper(x)
def not_thin(engine, x):
    with engine.begin() as conn:
        return Store(engine).not_thin(x)
class Store:
    def method(self, engine): pass
class Holder:
    def __init__(self, engine): pass
    def later(self, engine): pass
'''
    assert engine_takers(source, "m") == {
        "m.by_name": False,
        "m.by_type": False,
        "m.pair": False,
        "m.wrapper": True,
        "m.not_thin": False,
        "m.Holder.later": False,
    }


def test_the_tree_in_the_development_docs_matches_the_package():
    """docs/development.md draws the package: every module it names exists, and it names every
    package, every module at the top, and each module of the rules, the services' packages and
    migrate (the store's, db's, the parsers' and the commands' it describes as a kind)."""
    text = (ROOT.parent / "docs" / "development.md").read_text()
    block = text[text.index("```text\nctxtool/") :]
    block = block[: block.index("```", 3)]
    named = {w.removesuffix(".py").removesuffix("/") for w in re.findall(r"\w+(?:\.py|/)?", block)}
    stems = {path.stem for path in ROOT.rglob("*.py")}
    assert sorted(w[:-3] for w in re.findall(r"\b\w+\.py\b", block) if w[:-3] not in stems) == []
    listed = ["", "core", "core/evaluator", "compaction", "evaluation", "migrate"]
    missing = sorted(
        f"{path.relative_to(ROOT)}"
        for folder in listed
        for path in (ROOT / folder).iterdir()
        if (path.suffix == ".py" and path.stem not in ("__init__", "__main__"))
        or (path.is_dir() and (path / "__init__.py").exists())
        if path.stem not in named
    )
    assert missing == []


# Where a read of a session's restored context starts: each of these once wrote the preamble
# (the session, its encoding, its latest checkpoint, the cut) out for itself.
READS_FROM_THE_HEAD = {
    "store/reads.py": ["restored_context", "context_tokens"],
    "store/counts.py": ["read_suffix", "read_tails"],
    "store/candidates.py": ["exact_context_tokens", "summed_context_tokens"],
    "compaction/compactor.py": ["Compactor._prepare_from_tail"],
}


def test_every_read_of_a_restored_context_starts_from_the_session_head():
    """One preamble: ``Store.head`` (``store.reads.session_head``) reads the session, its
    encoding, its latest checkpoint and the cut, and the six reads that each wrote it out call
    it; the head's query is run nowhere else."""
    calls = {}
    for file, names in READS_FROM_THE_HEAD.items():
        tree = ast.parse((ROOT / file).read_text())
        functions = {
            f"{owner.name}.{f.name}" if owner is not tree else f.name: f
            for owner in [tree, *[n for n in tree.body if isinstance(n, ast.ClassDef)]]
            for f in owner.body
            if isinstance(f, ast.FunctionDef)
        }
        for name in names:
            called = {
                ast.unparse(node.func)
                for node in ast.walk(functions[name])
                if isinstance(node, ast.Call)
            }
            calls[name] = bool(called & {"session_head", "self.store.head", "store.head"})
    assert calls == {name: True for names in READS_FROM_THE_HEAD.values() for name in names}
    reads = (ROOT / "store" / "reads.py").read_text()
    assert "def head(" in reads and "return session_head(c, session_id, encoding)" in reads
    users = sorted(
        str(path.relative_to(ROOT))
        for path in ROOT.rglob("*.py")
        if "_HEAD_QUERY" in path.read_text()
    )
    assert users == ["store/reads.py"]


# Public names defined at the top of two modules, each with its own meaning, to be renamed with
# its fix (the test fails when one is gone as well as when a new one appears): none left.
KNOWN_NAMES_TWICE: set[str] = set()


def test_no_public_name_is_defined_in_two_modules():
    """One public name per concept: a function or class defined at the top of a module is
    defined there alone (a re-export imports it, and is no second definition)."""
    where: dict[str, list[str]] = {}
    for path in ROOT.rglob("*.py"):
        for node in ast.parse(path.read_text()).body:
            defines = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
            if isinstance(node, defines) and not node.name.startswith("_"):
                where.setdefault(node.name, []).append(module_name(path))
    assert {name for name, modules in where.items() if len(modules) > 1} == KNOWN_NAMES_TWICE


def test_where_a_change_goes_names_places_that_exist():
    """docs/development.md says in one line each where a new rule, query, difference between
    databases, command, format and summarizer goes; each folder, file and name it gives
    exists (a folder or file under ctxtool/, a class, function or registry defined there)."""
    text = (ROOT.parent / "docs" / "development.md").read_text()
    lines = [line for line in text.splitlines() if line.startswith("- A new ")]
    kinds = [line.removeprefix("- A new ").split(":")[0] for line in lines]
    assert kinds == [
        "rule",
        "query",
        "difference between databases",
        "command",
        "format",
        "summarizer",
    ]
    source = "\n".join(path.read_text() for path in ROOT.rglob("*.py"))
    wrong = []
    for name in re.findall(r"`([^`]+)`", "\n".join(lines)):
        if "/" in name:
            path = ROOT.parent / name if name.startswith("ctxtool/") else ROOT / name
            wrong += [] if path.exists() else [name]
        elif name.isidentifier():
            defined = rf"^(class|def) {name}\b|^{name}\b.*="
            wrong += [] if re.search(defined, source, re.MULTILINE) else [name]
    assert wrong == []
