"""The package's dependency rule, checked on the source (every import, including the ones
inside functions): no import cycle, and each package imports only the layers below it.

    errors, resources, style        leaves
    core                            pure runtime core: keys, acks, store contract, History
    revisions, pg                   the migration set's facts; PostgreSQL plumbing
    sets -> report                  migration sets in any format; documents rendered for people
    runtime, stores -> snapshot     the runtime half
    engine                          the engine that upgrades any set (formats inside it)
    queue_schema                    queueguard's own set and its gates, on the engine
    lint, mutate, fleet             the gates over many sets and databases
    upgrade                         aliases of earlier releases' import paths
    testing, cli, queueguard        the pytest plugin, the command line, the public API

bench/ (benchmarks and chaos scenarios, not shipped) keeps the same shape: no import cycle,
one folder per concern sharing code only through bench.common (and bench.topology), at most
12 modules at its top; queueguard never imports it.
"""

from __future__ import annotations

import ast
from pathlib import Path

import bench
import queueguard

SRC = Path(queueguard.__file__).parent
BENCH = Path(bench.__file__).parent
#: modules and packages bench/ may hold at its top (its content lives in one folder per concern)
BENCH_TOP_MAX = 12
#: bench/'s folders that others may import: the helpers more than one concern uses (common)
#: and the production parts they start (topology, itself on common)
BENCH_SHARED = {"common": set(), "topology": {"common"}}
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
    "sets": LEAVES | {"pg", "revisions"},
    "report": LEAVES | {"sets"},
    "engine": LEAVES | {"pg", "revisions", "sets", "report"},
    "queue_schema": LEAVES
    | {"core", "pg", "revisions", "runtime", "stores", "snapshot", "sets", "report", "engine"},
    "lint": LEAVES | {"revisions", "engine", "queue_schema", "sets", "report"},
    "mutate": LEAVES | {"revisions", "pg", "engine", "queue_schema", "lint", "report"},
    "fleet": LEAVES | {"pg", "revisions", "sets", "report", "engine", "queue_schema"},
    "upgrade": {"queue_schema"},
}
RUNTIME_HALF = {"core", "runtime", "stores", "snapshot"}
UPGRADE_HALF = {"engine", "queue_schema", "upgrade", "lint", "fleet", "mutate", "sets", "report"}


def _module_name(path: Path, root: Path = SRC) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules(root: Path = SRC) -> dict[str, Path]:
    return {_module_name(p, root): p for p in root.rglob("*.py")}


def _imports(name: str, path: Path, known: set[str], top: str = "queueguard") -> set[str]:
    """Modules of the package `top` that `name` imports (a `from pkg import sub` counts as
    the submodule)."""
    found: set[str] = set()
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.split(".")[0] == top}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1])
                base = f"{base}.{node.module}" if node.module else base
            if base.split(".")[0] != top:
                continue
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                found.add(sub if sub in known else base)
    return found & known


def _graph(root: Path = SRC) -> dict[str, set[str]]:
    modules = _modules(root)
    known = set(modules)
    return {name: _imports(name, path, known, root.name) - {name} for name, path in modules.items()}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
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
    return cycles


def _layer(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "queueguard"


def test_no_import_cycle() -> None:
    assert _cycles(_graph()) == []


def test_the_cycle_finder_finds_cycles() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"d"}, "e": {"a"}}
    assert _cycles(graph) == [["a", "b", "c", "a"], ["d", "d"]]


def test_no_import_cycle_in_bench() -> None:
    """Every import counts, those under `if TYPE_CHECKING:` and inside functions too: a
    cycle hidden there is still two modules that cannot be understood one without the
    other."""
    assert _cycles(_graph(BENCH)) == []


def test_the_checker_sees_bench_imports() -> None:
    graph = _graph(BENCH)
    assert "bench.chaos.crash" in graph["bench.chaos.pooler_crash"]  # from bench.chaos import
    assert "bench.common.commands" in graph["bench.common.host_process"]


def test_bench_keeps_its_top_small() -> None:
    """bench/ holds one folder per concern (chaos, failover, online, …) and the helpers they
    share in bench/common/, not a flat list of prefixed scripts."""
    top = sorted(
        [p.name for p in BENCH.glob("*.py")]
        + [f"{p.name}/" for p in BENCH.iterdir() if (p / "__init__.py").is_file()]
    )
    assert len(top) <= BENCH_TOP_MAX, top


def test_bench_folders_share_code_only_through_common_and_topology() -> None:
    """A concern (chaos, failover, online, …) imports its own modules, bench.common and
    bench.topology, never another concern's: what two of them use lives in bench.common."""

    def folder(module: str) -> str:
        parts = module.split(".")
        return parts[1] if len(parts) > 1 else "bench"

    breaches = [
        f"{module} imports {target}"
        for module, targets in sorted(_graph(BENCH).items())
        for target in sorted(targets)
        if folder(target) != folder(module)
        and folder(target) not in BENCH_SHARED.get(folder(module), set(BENCH_SHARED))
    ]
    assert breaches == []


def test_queueguard_never_imports_bench() -> None:
    """bench/ is not in the wheel: an import of it would fail on every install."""
    known = set(_modules(BENCH))
    imports = {name: _imports(name, path, known, "bench") for name, path in _modules().items()}
    assert {name: found for name, found in imports.items() if found} == {}


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


def test_the_engine_imports_nothing_of_the_own_set_the_runtime_or_the_fleet() -> None:
    """The engine upgrades any set: queueguard's own set is one of its users, not a part."""
    graph = _graph()
    breaches = [
        f"{module} imports {target}"
        for module, targets in sorted(graph.items())
        if _layer(module) == "engine"
        for target in sorted(targets)
        if _layer(target) in {"queue_schema", "upgrade", "runtime", "stores", "snapshot", "fleet"}
    ]
    assert breaches == []


def test_sets_import_nothing_of_the_engine() -> None:
    """The readers of every format stay below the engine: a set is read without applying it."""
    graph = _graph()
    assert [
        (module, target)
        for module, targets in sorted(graph.items())
        if _layer(module) == "sets"
        for target in targets
        if _layer(target) in {"engine", "queue_schema", "fleet"}
    ] == []


def test_a_format_imports_nothing_of_another_format() -> None:
    """A format's rooms (engine/formats/<name>/) are its own: adding a format touches its
    rooms and the interface only."""

    def fmt(module: str) -> str | None:
        parts = module.split(".")
        return parts[3] if parts[1:3] == ["engine", "formats"] and len(parts) > 3 else None

    graph = _graph()
    assert [
        (module, target)
        for module, targets in sorted(graph.items())
        if fmt(module)
        for target in targets
        if fmt(target) and fmt(target) != fmt(module)
    ] == []


def test_the_checker_sees_function_level_imports() -> None:
    """The rule must not be blind to imports inside functions (they were how the old cycle
    between the schema check and the runner hid)."""
    graph = _graph()
    assert "queueguard.queue_schema.runner" in graph["queueguard.queue_schema.install"]


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


#: a module past this many lines has grown two concerns: split it along its seam
MAX_MODULE_LINES = 400
#: a function past this many lines (from `def` to its last line) does more than one thing
MAX_FUNCTION_LINES = 80


def test_no_source_file_over_the_size_limit() -> None:
    long = {
        str(path.relative_to(SRC.parent)): n
        for path in SRC.rglob("*.py")
        if (n := len(path.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES
    }
    assert not long, f"split these along their seams: {long}"


def test_no_function_over_the_size_limit() -> None:
    long = {
        f"{path.relative_to(SRC.parent)}:{node.name}": n
        for path in SRC.rglob("*.py")
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and (n := (node.end_lineno or node.lineno) - node.lineno + 1) > MAX_FUNCTION_LINES
    }
    assert not long, f"split these where their steps divide: {long}"
