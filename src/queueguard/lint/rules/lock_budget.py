"""migration.lock_budget: each statement's locks fit the revision's declared lock budget.

A revision declares the exact lock it takes on each table that existed before it ran
(`locks = {…}` in `versions/<rev>.py`; `queueguard.engine.locks`). `upgrade` enforces the
budget on what the transaction really holds; this rule checks the step files before anything
runs, using PostgreSQL's documented table-lock modes (docs "Explicit Locking"):

- `LOCK TABLE t [IN mode MODE]` takes `mode` (ACCESS EXCLUSIVE by default);
- `ALTER TABLE`, `DROP TABLE`, `TRUNCATE`, `VACUUM FULL`, `CLUSTER` take ACCESS EXCLUSIVE
  (the ALTER actions `lock_order` knows as weaker take SHARE UPDATE EXCLUSIVE, or SHARE ROW
  EXCLUSIVE for foreign keys and triggers);
- `CREATE INDEX … ON t` takes SHARE (SHARE UPDATE EXCLUSIVE when CONCURRENTLY), `CREATE
  TRIGGER … ON t` SHARE ROW EXCLUSIVE, `VACUUM`/`ANALYZE t` SHARE UPDATE EXCLUSIVE;
- the target of `INSERT`/`UPDATE`/`DELETE`/`MERGE` takes ROW EXCLUSIVE, tables of a
  `SELECT … FOR UPDATE/SHARE` ROW SHARE, every other table a statement reads ACCESS SHARE.

A statement that takes a stronger lock than the budget, or a lock on a table outside it, is a
finding at that statement; a budget lock that no statement reaches is a finding at the
revision's first file. Tables the revision creates itself (new, temporary or renamed into
place), CTE names and queueguard's bookkeeping are outside the budget.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from pathlib import Path

import sqlglot
from sqlglot import exp

from queueguard import revisions
from queueguard.engine.locks import BOOKKEEPING
from queueguard.errors import UsageError
from queueguard.lint.model import (
    Corpus,
    Finding,
    Rule,
    SqlFile,
    Statement,
    ast_table_name,
    quiet_sqlglot,
    table_name,
)
from queueguard.lint.rules.lock_order import LOCK_STATEMENT, access_exclusive_tables
from queueguard.revisions import LOCK_MODES

CODE = "migration.lock_budget"
HINT = (
    "take only the locks the revision declares in `locks` (versions/<rev>.py), or change the "
    "budget deliberately: it is what preflight and the docs tell operators the upgrade blocks"
)
_FLAGS = re.IGNORECASE | re.DOTALL
_IDENT = r'(?:"(?:[^"]|"")*"|[A-Za-z_][\w$.]*)'
_CREATE_TABLE = re.compile(
    rf"\s*CREATE\s+(?:(?:GLOBAL|LOCAL)\s+)?(?:TEMP(?:ORARY)?\s+|UNLOGGED\s+)?TABLE\s+"
    rf"(?:IF\s+NOT\s+EXISTS\s+)?(?P<name>{_IDENT})",
    _FLAGS,
)
_RENAME = re.compile(rf"\s*ALTER\s+TABLE\s+.*?\bRENAME\s+TO\s+(?P<name>{_IDENT})\s*$", _FLAGS)
_INDEX = re.compile(
    rf"\s*CREATE\s+(?:UNIQUE\s+)?INDEX\s+(?P<conc>CONCURRENTLY\s+)?.*?\bON\s+(?:ONLY\s+)?"
    rf"(?P<name>{_IDENT})",
    _FLAGS,
)
_TRIGGER = re.compile(
    rf"\s*CREATE\s+(?:OR\s+REPLACE\s+)?TRIGGER\s+.*?\bON\s+(?P<name>{_IDENT})", _FLAGS
)
_VACUUM = re.compile(
    rf"\s*(?:VACUUM|ANALYZE)\b(?:\s*\([^)]*\))?(?:\s+[A-Z]+)*\s+(?P<name>{_IDENT})", _FLAGS
)
_CREATE_AS = re.compile(
    r"\s*CREATE\s+(?:(?:GLOBAL|LOCAL)\s+)?(?:TEMP(?:ORARY)?\s+|UNLOGGED\s+)?TABLE\b.*?"
    r"\bAS\s+(?P<query>(?:SELECT|WITH|VALUES|\()\b.*)$",
    _FLAGS,
)
_FOREIGN_OR_TRIGGER = re.compile(r"\bFOREIGN\s+KEY\b|\bTRIGGER\b", _FLAGS)
_REFERENCES = re.compile(rf"\bREFERENCES\s+(?P<name>{_IDENT})", _FLAGS)


def _stronger(a: str, b: str) -> bool:
    return LOCK_MODES.index(a) > LOCK_MODES.index(b)


def statement_locks(stmt: Statement) -> dict[str, str]:
    """{table: strongest mode} the statement takes, by PostgreSQL's documented rules."""
    taken: dict[str, str] = {}

    def take(table: str, mode: str) -> None:
        if table and (table not in taken or _stronger(mode, taken[table])):
            taken[table] = mode

    clean = stmt.clean
    if match := LOCK_STATEMENT.match(clean):
        mode = " ".join((match.group("mode") or "ACCESS EXCLUSIVE").upper().split())
        for piece in match.group("names").split(","):
            take(
                table_name(re.sub(r"^\s*ONLY\s+", "", piece, flags=_FLAGS).strip().rstrip("*")),
                mode,
            )
        return taken
    strongest = access_exclusive_tables(stmt)
    for table, _ in strongest:
        take(table, "ACCESS EXCLUSIVE")
    if re.match(r"\s*ALTER\s+TABLE\b", clean, _FLAGS) and not strongest:
        weak = (
            "SHARE ROW EXCLUSIVE" if _FOREIGN_OR_TRIGGER.search(clean) else "SHARE UPDATE EXCLUSIVE"
        )
        name = re.match(
            rf"\s*ALTER\s+TABLE\s+(?:IF\s+EXISTS\s+)?(?:ONLY\s+)?(?P<n>{_IDENT})", clean, _FLAGS
        )
        if name:
            take(table_name(name.group("n")), weak)
    if match := _INDEX.match(clean):
        take(
            table_name(match.group("name")),
            "SHARE UPDATE EXCLUSIVE" if match.group("conc") else "SHARE",
        )
    elif match := _TRIGGER.match(clean):
        take(table_name(match.group("name")), "SHARE ROW EXCLUSIVE")
    elif (match := _VACUUM.match(clean)) and not strongest:
        take(table_name(match.group("name")), "SHARE UPDATE EXCLUSIVE")
    for ref in _REFERENCES.finditer(clean):
        take(table_name(ref.group("name")), "SHARE ROW EXCLUSIVE")
    ast = stmt.ast
    if ast is not None and not isinstance(ast, exp.Command):
        _dml_locks(ast, take)
    elif (match := _CREATE_AS.match(clean)) is not None:
        # sqlglot keeps `CREATE TEMP TABLE … ON COMMIT DROP AS SELECT …` as a raw command:
        # the query it reads is parsed on its own.
        with quiet_sqlglot():
            try:
                query = sqlglot.parse_one(stmt.text[match.start("query") :], read="postgres")
            except sqlglot.errors.SqlglotError:
                query = None
        if isinstance(query, exp.Expression):
            _dml_locks(query, take)
    return taken


def _dml_locks(ast: exp.Expression, take: Callable[[str, str], None]) -> None:
    ctes = {cte.alias_or_name for cte in ast.find_all(exp.CTE)}
    targets: set[int] = set()
    for node in ast.find_all(exp.Insert, exp.Update, exp.Delete, exp.Merge):
        target = node.this.this if isinstance(node.this, exp.Schema) else node.this
        if isinstance(target, exp.Table) and target.name not in ctes:
            take(ast_table_name(target), "ROW EXCLUSIVE")
            targets.add(id(target))
    row_share: set[int] = set()
    for select in ast.find_all(exp.Select):
        if select.args.get("locks"):
            for table in select.find_all(exp.Table):
                if table.find_ancestor(exp.Lock) is None:
                    row_share.add(id(table))
    for table in ast.find_all(exp.Table):
        if id(table) in targets or table.name in ctes or table.find_ancestor(exp.Lock):
            continue
        if isinstance(table.parent, exp.Create) or table.find_ancestor(exp.Schema) is table.parent:
            continue  # the name a CREATE defines, not a table it reads
        take(ast_table_name(table), "ROW SHARE" if id(table) in row_share else "ACCESS SHARE")


def _created(stmt: Statement) -> str | None:
    """The table a statement brings into being (created, or renamed into place)."""
    for pattern in (_CREATE_TABLE, _RENAME):
        if match := pattern.match(stmt.clean):
            return table_name(match.group("name"))
    return None


def _budget(file: SqlFile) -> dict[str, str] | None:
    """The budget of the revision `file` belongs to (None: not a revision of a loadable set)."""
    if file.revision is None:
        return None
    root = file.path.parent.parent.parent
    if not (root / "versions").is_dir():
        return None
    try:
        return revisions.load(Path(root)).get(file.revision).locks or {}
    except UsageError:
        return None


def check(corpus: Corpus) -> Iterator[Finding]:
    for unit in corpus.migration_units:
        budget = _budget(unit[0]) if unit else None
        if budget is not None:
            yield from _check_unit(unit, budget)


def _check_unit(unit: tuple[SqlFile, ...], budget: dict[str, str]) -> Iterator[Finding]:
    created: set[str] = set()
    reached: dict[str, str] = {}
    for file in unit:
        for stmt in file.statements:
            for table, mode in statement_locks(stmt).items():
                if table in created or table in BOOKKEEPING:
                    continue
                if table not in reached or _stronger(mode, reached[table]):
                    reached[table] = mode
                allowed = budget.get(table)
                if allowed is None:
                    message = f"takes {mode} on {table}, which is not in the revision's lock budget"
                elif _stronger(mode, allowed):
                    message = f"takes {mode} on {table}, above its lock budget ({allowed})"
                else:
                    continue
                yield file.finding(CODE, stmt.start, message, HINT)
            if name := _created(stmt):
                created.add(name)
    for table, mode in sorted(budget.items()):
        got = reached.get(table)
        if got is None or _stronger(mode, got):
            found = f"at most {got}" if got else "no lock"
            yield unit[0].finding(
                CODE,
                0,
                f"the lock budget declares {mode} on {table}, but the steps take {found}",
                HINT,
            )


RULE = Rule(
    CODE, "each statement's locks fit the revision's declared lock budget", check, silenceable=False
)
