"""One engine, read from the source (AST and SQL files): the runner lock is taken by one
module, the lock-timeout ladder is climbed by one function, and the word "foreign" names
nothing of the engine or of a set. What is checked here would otherwise come back one copy at
a time: each new format or path is tempted to write its own loop and its own lock."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import queueguard

SRC = Path(queueguard.__file__).parent
REPO = SRC.parent.parent
#: the Django runner runs in the project's interpreter (standard library and Django only):
#: it applies the ladder it is handed (`ladder.schedule`) in a loop of its own
PROJECT_SIDE = SRC / "sets" / "django_runner"
#: what a lock-timeout retry loop names
LADDER_WORDS = re.compile(
    r"lock_?timeout|lock_wait|LockNotAvailable|RETRY_GROWTH|RETRY_SLEEP_S", re.I
)
#: an advisory lock taken in SQL
ADVISORY = re.compile(r"pg_(try_)?advisory_(xact_)?lock\s*\(", re.I)


def _sources() -> dict[str, ast.Module]:
    return {
        str(p.relative_to(SRC)): ast.parse(p.read_text(encoding="utf-8"))
        for p in sorted(SRC.rglob("*.py"))
        if PROJECT_SIDE not in p.parents
    }


def _names(node: ast.AST) -> set[str]:
    found = set()
    for n in ast.walk(node):
        if isinstance(n, ast.Name):
            found.add(n.id)
        elif isinstance(n, ast.Attribute):
            found.add(n.attr)
        elif isinstance(n, ast.arg):
            found.add(n.arg)
    return found


def ladder_loops(tree: ast.Module) -> list[str]:
    """Functions with a loop that sleeps, catches, and names a lock timeout: a retry ladder."""
    found = []
    for fn in ast.walk(tree):
        if not isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        for loop in ast.walk(fn):
            if not isinstance(loop, ast.For | ast.While):
                continue
            names = _names(loop)
            catches = any(isinstance(n, ast.Try) and n.handlers for n in ast.walk(loop))
            if "sleep" in names and catches and any(LADDER_WORDS.search(n) for n in names):
                found.append(fn.name)
                break
    return found


def test_one_function_climbs_the_lock_timeout_ladder() -> None:
    loops = {f"{path}:{fn}" for path, tree in _sources().items() for fn in ladder_loops(tree)}
    assert loops == {"engine/apply/ladder.py:climb"}


def test_the_ladder_finder_finds_a_ladder() -> None:
    planted = ast.parse(
        "def retry(conn):\n"
        "    for attempt in range(3):\n"
        "        try:\n"
        "            return conn.execute('x')\n"
        "        except psycopg.errors.LockNotAvailable:\n"
        "            time.sleep(0.1)\n"
    )
    assert ladder_loops(planted) == ["retry"]


def test_the_ladder_constants_are_read_by_the_ladder_alone() -> None:
    readers = {
        path
        for path, tree in _sources().items()
        if {"RETRY_GROWTH", "RETRY_SLEEP_S"} & _names(tree)
    }
    assert readers == {"engine/apply/ladder.py"}


def test_one_module_takes_the_runner_lock() -> None:
    """The runner's advisory lock is written once (runner_lock.sql), loaded by one module;
    no Python source spells an advisory lock. (The fleet's control database has a lock of
    its own, on its own key, for creating its schema.)"""
    sql_files = {
        str(p.relative_to(SRC))
        for p in SRC.rglob("*.sql")
        if any(
            ADVISORY.search(statement) and "queueguard-fleet-setup" not in statement
            for statement in p.read_text(encoding="utf-8").split("-- name:")
        )
    }
    assert sql_files == {"engine/apply/sql/runner_lock.sql"}
    loaders = {
        path
        for path, tree in _sources().items()
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and node.value == "runner_lock.sql"
    }
    assert loaders == {"engine/apply/runner_lock.py"}
    spelled = {
        path
        for path, tree in _sources().items()
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and ADVISORY.search(node.value)
    }
    assert spelled == set()


def test_nothing_of_the_engine_or_a_set_is_called_foreign() -> None:
    """Module paths and words: the engine upgrades every set, ours included (FOREIGN KEY,
    foreign tables and squawk's rule names are PostgreSQL's words and stay)."""
    paths = [
        str(p.relative_to(REPO))
        for top in ("src", "bench", "tests", "docs")
        for p in (REPO / top).rglob("*")
        if re.search(r"(^|[./_-])foreign\b", p.name)
    ]
    assert paths == []
    texts = [
        f"{p.relative_to(REPO)}:{n}"
        for top in ("src", "bench", "docs", "examples")
        for p in (REPO / top).rglob("*")
        if p.is_file() and p.suffix in {".py", ".md", ".sql", ".yml", ".toml"}
        for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), start=1)
        if re.search(r"foreign[- ]sets?\b|[./]foreign\b", line, re.I)
    ]
    assert texts == []


def test_one_rehearse() -> None:
    """The rehearsal (a copy of the target, the upgrade on it, the copy dropped) is one
    function; the own set's and the other formats' rehearsals are its users."""
    found = [
        path
        for path, tree in _sources().items()
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef) and node.name == "rehearse"
    ]
    assert found == ["engine/rehearse/rehearsal.py"]


def test_one_comparison_of_a_chain_with_a_fresh_install() -> None:
    """Every comparison of catalogs that involves a fresh install goes through
    `engine.verify.fresh.against_fresh`."""
    comparing = {
        f"{path}:{fn.name}"
        for path, tree in _sources().items()
        for fn in ast.walk(tree)
        if isinstance(fn, ast.FunctionDef)
        for call in ast.walk(fn)
        if isinstance(call, ast.Call)
        and isinstance(call.func, ast.Attribute)
        and call.func.attr in {"diff", "differences"}
        and any("fresh" in name for arg in call.args for name in _names(arg))
    }
    assert comparing == {"engine/verify/fresh.py:against_fresh"}
