"""migration.lock_order: ACCESS EXCLUSIVE locks are taken in the documented order.

A revision runs in one transaction, so its locks accumulate across its step files. When it
takes ACCESS EXCLUSIVE on more than one table of an ordered chain (task_queues → tasks →
runtime_protocol; executions → scheduled_tasks), the first ACCESS EXCLUSIVE acquisition of
each must follow the chain: parents before children, the order the runtime takes them in, so
the migration and a runtime transaction cannot deadlock. Tables outside the chains (temporary
plan tables, new tables) are not ordered.

Statements that take ACCESS EXCLUSIVE on a table: `LOCK [TABLE]` (in ACCESS EXCLUSIVE mode,
PostgreSQL's default), `ALTER TABLE` (except the single weaker actions below), `DROP TABLE`,
`TRUNCATE`, `VACUUM FULL`, `CLUSTER`. sqlglot's tree gives the table of ALTER/DROP/TRUNCATE;
LOCK, VACUUM and CLUSTER (which sqlglot leaves as opaque commands) are read from the statement
text with comments and literals blanked.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from sqlglot import exp

from queueguard.lint.model import (
    Corpus,
    Finding,
    Rule,
    SqlFile,
    Statement,
    ast_table_name,
    table_name,
)

CODE = "migration.lock_order"
#: The documented lock order, parents before children. Tables of different chains are not
#: ordered against each other.
LOCK_ORDER: tuple[tuple[str, ...], ...] = (
    ("task_queues", "tasks", "runtime_protocol"),
    ("executions", "scheduled_tasks"),
)
HINT = (
    "take every ACCESS EXCLUSIVE lock up front in the revision's 00_locks.sql, parents before "
    "children: LOCK TABLE task_queues IN ACCESS EXCLUSIVE MODE; then LOCK TABLE tasks …"
)

_IDENT = r'(?:"(?:[^"]|"")*"|[A-Za-z_][\w$]*)'
_NAME = rf"{_IDENT}(?:\s*\.\s*{_IDENT})*"
_FLAGS = re.IGNORECASE | re.DOTALL
#: `LOCK [TABLE] names [IN mode MODE] [NOWAIT]` (shared with lock_budget).
LOCK_STATEMENT = re.compile(
    r"\s*LOCK\s+(?:TABLE\s+)?(?P<names>.*?)(?:\s+IN\s+(?P<mode>[A-Z ]+?)\s+MODE)?"
    r"(?:\s+NOWAIT)?\s*$",
    _FLAGS,
)
_ALTER = re.compile(
    rf"\s*ALTER\s+TABLE\s+(?:IF\s+EXISTS\s+)?(?:ONLY\s+)?(?P<name>{_NAME})\s*\*?\s+(?P<action>.*)$",
    _FLAGS,
)
_DROP = re.compile(
    r"\s*DROP\s+TABLE\s+(?:IF\s+EXISTS\s+)?(?P<names>.*?)(?:\s+CASCADE|\s+RESTRICT)?\s*$", _FLAGS
)
_TRUNCATE = re.compile(
    r"\s*TRUNCATE\s+(?:TABLE\s+)?(?P<names>.*?)"
    r"(?:\s+(?:RESTART|CONTINUE)\s+IDENTITY)?(?:\s+CASCADE|\s+RESTRICT)?\s*$",
    _FLAGS,
)
_VACUUM_FULL = re.compile(
    r"\s*VACUUM\s+(?:FULL\b(?:\s+(?:FREEZE|VERBOSE|ANALYZE)\b)*|\((?P<opts>[^)]*)\))\s*(?P<names>.*)$",
    _FLAGS,
)
_CLUSTER = re.compile(rf"\s*CLUSTER\s+(?:VERBOSE\s+)?(?P<names>{_NAME})", _FLAGS)
#: ALTER TABLE actions that take a lock weaker than ACCESS EXCLUSIVE (when alone).
_WEAK_ACTION = re.compile(
    r"\s*(?:VALIDATE\s+CONSTRAINT|SET\s+STATISTICS|ALTER\s+(?:COLUMN\s+)?\S+\s+SET\s+STATISTICS"
    r"|CLUSTER\s+ON|SET\s+WITHOUT\s+CLUSTER|ATTACH\s+PARTITION|DETACH\s+PARTITION"
    r"|(?:ENABLE|DISABLE)\s+(?:ALWAYS\s+|REPLICA\s+)?TRIGGER"
    r"|ADD\s+(?:CONSTRAINT\s+\S+\s+)?FOREIGN\s+KEY)\b",
    _FLAGS,
)


def check(corpus: Corpus) -> Iterator[Finding]:
    for unit in corpus.migration_units:
        yield from _check_unit(unit)


def _check_unit(unit: tuple[SqlFile, ...]) -> Iterator[Finding]:
    first: dict[str, tuple[SqlFile, int]] = {}
    for file in unit:
        for stmt in file.statements:
            for table, offset in access_exclusive_tables(stmt):
                if table in first:
                    continue
                chain = next((c for c in LOCK_ORDER if table in c), ())
                later = [t for t in first if t in chain and chain.index(t) > chain.index(table)]
                if later:
                    earlier_file, earlier_offset = first[later[0]]
                    line, _ = earlier_file.position(earlier_offset)
                    yield file.finding(
                        CODE,
                        stmt.start + offset,
                        f"ACCESS EXCLUSIVE on {table} after {later[0]} "
                        f"({earlier_file.path.name}:{line}); the documented order is "
                        + " → ".join(chain),
                        HINT,
                    )
                first[table] = (file, stmt.start + offset)


def access_exclusive_tables(stmt: Statement) -> list[tuple[str, int]]:
    """(table, offset in the statement) for each table the statement locks ACCESS EXCLUSIVE."""
    ast = stmt.ast
    if isinstance(ast, exp.Alter) and str(ast.args.get("kind", "")).upper() == "TABLE":
        start, end = _span(ast.this)
        if start is not None and end is not None:
            if _weak(stmt.clean[end + 1 :]):
                return []
            return [(ast_table_name(ast.this), start)]
    if (isinstance(ast, exp.Drop) and str(ast.args.get("kind", "")).upper() == "TABLE") or (
        isinstance(ast, exp.TruncateTable)
    ):
        tables = [t for t in ast.find_all(exp.Table) if t.parent is ast]
        located = [(ast_table_name(t), _span(t)[0]) for t in tables]
        if tables and all(offset is not None for _, offset in located):
            return [(name, offset or 0) for name, offset in located]
    return _from_text(stmt.clean)


def _from_text(clean: str) -> list[tuple[str, int]]:
    """The same facts read from the cleaned statement text (for sqlglot's Command fallback)."""
    if match := LOCK_STATEMENT.match(clean):
        mode = " ".join((match.group("mode") or "ACCESS EXCLUSIVE").upper().split())
        return _names(clean, match, "names") if mode == "ACCESS EXCLUSIVE" else []
    if match := _ALTER.match(clean):
        if match.group("name").upper() == "ALL" or _weak(match.group("action")):
            return []
        return [(table_name(match.group("name")), match.start("name"))]
    for pattern in (_DROP, _TRUNCATE, _CLUSTER):
        if match := pattern.match(clean):
            return _names(clean, match, "names")
    if (match := _VACUUM_FULL.match(clean)) and _full(match.group("opts")):
        return _names(clean, match, "names")
    return []


def _names(clean: str, match: re.Match[str], group: str) -> list[tuple[str, int]]:
    """Comma-separated table names of a match group, each with its offset (ONLY, * dropped)."""
    result = []
    base = match.start(group)
    for piece in re.finditer(r"[^,]+", match.group(group)):
        text = re.sub(r"\(.*", "", piece.group(0), flags=re.DOTALL)  # VACUUM column lists
        name = re.match(rf"\s*(?:ONLY\s+)?(?P<n>{_NAME})", text, re.IGNORECASE)
        if name:
            result.append((table_name(name.group("n")), base + piece.start() + name.start("n")))
    return result


def _weak(action: str) -> bool:
    """One action that takes less than ACCESS EXCLUSIVE (several actions: assume the worst)."""
    depth = 0
    for char in action:
        depth += {"(": 1, ")": -1}.get(char, 0)
        if char == "," and depth == 0:
            return False
    return _WEAK_ACTION.match(action) is not None


def _full(opts: str | None) -> bool:
    if opts is None:  # `VACUUM FULL …`
        return True
    return re.search(r"\bFULL\b(?!\s+(?:FALSE|OFF|0)\b)", opts, re.IGNORECASE) is not None


def _span(node: exp.Expression) -> tuple[int | None, int | None]:
    """Start and end offsets (in the statement) of a table's name, from sqlglot's token meta."""
    ident = node.this if isinstance(node, exp.Table) else node
    meta = ident.meta if isinstance(ident, exp.Expression) and ident._meta else {}
    if "start" not in meta or "end" not in meta:
        return None, None
    return int(meta["start"]), int(meta["end"])  # quotes included


RULE = Rule(CODE, "ACCESS EXCLUSIVE locks on several tables follow the documented order", check)
