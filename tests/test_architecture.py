"""The package's dependency rule, checked on the source (every import, including the ones
inside functions): no import cycle, and each package imports only the layers below it.

    errors, resources, style        leaves
    core                            pure runtime core: keys, acks, store contract, History
    revisions, pg                   the migration set's facts; PostgreSQL plumbing
    runtime, stores -> snapshot     the runtime half
    upgrade, lint                   the upgrade half
    testing, cli, queueguard        the pytest plugin, the command line, the public API
"""

from __future__ import annotations

import ast
from pathlib import Path

import queueguard

SRC = Path(queueguard.__file__).parent
LEAVES = {"errors", "resources", "style"}
#: package (first component below queueguard) -> the packages it may import
ALLOWED: dict[str, set[str]] = {
    "errors": set(),
    "resources": set(),
    "style": set(),
    "core": {"errors"},
    "revisions": {"errors", "resources"},
    "pg": {"errors"},
    "runtime": {"core", "errors"},
    "stores": {"core", "errors", "pg", "revisions"},
    "snapshot": {"core", "errors", "stores"},
    "upgrade": LEAVES | {"core", "pg", "revisions", "runtime", "stores", "snapshot"},
    "lint": LEAVES | {"revisions", "upgrade"},
    "mutate": LEAVES | {"revisions", "pg", "upgrade", "lint"},
}
RUNTIME_HALF = {"core", "runtime", "stores", "snapshot"}
UPGRADE_HALF = {"upgrade", "lint"}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in SRC.rglob("*.py")}


def _imports(name: str, path: Path, known: set[str]) -> set[str]:
    """queueguard modules `name` imports (a `from pkg import sub` counts as the submodule)."""
    found: set[str] = set()
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("queueguard")}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1])
                base = f"{base}.{node.module}" if node.module else base
            if not base.startswith("queueguard"):
                continue
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                found.add(sub if sub in known else base)
    return found & known


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    known = set(modules)
    return {name: _imports(name, path, known) - {name} for name, path in modules.items()}


def _layer(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "queueguard"


def test_no_import_cycle() -> None:
    graph = _graph()
    state: dict[str, int] = {}
    cycles: list[list[str]] = []

    def visit(node: str, trail: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                cycles.append([*trail[trail.index(nxt) :], nxt] if nxt in trail else [nxt])
            elif nxt not in state:
                visit(nxt, [*trail, nxt])
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node, [node])
    assert cycles == []


def test_each_package_imports_only_the_layers_below_it() -> None:
    breaches = [
        f"{module} imports {target}"
        for module, targets in sorted(_graph().items())
        for target in sorted(targets)
        if _layer(module) in ALLOWED
        and _layer(target) != _layer(module)
        and _layer(target) not in ALLOWED[_layer(module)]
    ]
    assert breaches == []


def test_the_runtime_half_imports_nothing_from_the_upgrade_half() -> None:
    graph = _graph()
    reachable: set[str] = set()
    todo = [m for m in graph if _layer(m) in RUNTIME_HALF]
    while todo:
        module = todo.pop()
        if module not in reachable:
            reachable.add(module)
            todo += graph[module]
    assert sorted(m for m in reachable if _layer(m) in UPGRADE_HALF) == []


def test_the_checker_sees_function_level_imports() -> None:
    """The rule must not be blind to imports inside functions (they were how the old cycle
    between the schema check and the runner hid)."""
    graph = _graph()
    assert "queueguard.upgrade.runner" in graph["queueguard.upgrade.install"]


def test_the_public_api() -> None:
    from queueguard import (
        Execution,
        Matching,
        MemoryStore,
        PhysicalQueue,
        PostgresStore,
        QueueguardError,
        StaleRangeError,
        task_payload,
    )

    assert issubclass(StaleRangeError, QueueguardError)
    assert {Execution, Matching, MemoryStore, PhysicalQueue, PostgresStore}
    assert task_payload("ns", "wf", "run", "activity", 1)["task"]["kind"] == "activity"
