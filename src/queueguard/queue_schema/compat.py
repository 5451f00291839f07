"""The static compatibility matrix: released workers' statements × schema revisions.

For every legacy statement catalog (`fixtures/legacy_workers/*.sql`, see `upgrade.legacy`)
and every revision 001–004, each statement is resolved with sqlglot against the schema of a
database migrated to that revision (`catalog.introspect`), and classified:

- `unresolvable`: a table or column it names does not exist there — it fails at once;
- `fenced`: it resolves, but cannot take effect: the handshake refuses the worker's
  protocol (the `runtime_protocol` row of that database), the statement runs in a
  transaction whose handshake refuses, or it is a range-checked write and a migration since
  the worker's own revision bumped every `range_id` (found in the migration SQL);
- `runs`: it resolves and takes effect: reads, History writes (at-least-once: History
  rejects a repeated start), user data (its own compare-and-swap), or any write on a schema
  the worker still legitimately owns.

The safety property (`Matrix.violations`): on head, no statement of an older protocol that
writes Matching state (`task_queues`, `tasks`) runs, and every older handshake refuses; on
its own revision every statement of a worker resolves.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from queueguard import revisions
from queueguard.engine import catalog as catalog_mod
from queueguard.pg.connect import connection
from queueguard.pg.scratch import ScratchDatabases
from queueguard.queue_schema.legacy.catalog import StatementCatalog, all_catalogs
from queueguard.queue_schema.runner import upgrade
from queueguard.queue_schema.statements import (
    HISTORY_TABLES,
    MATCHING_TABLES,
    PROTOCOL_TABLE,
    USER_DATA_TABLES,
    range_bumps,
    shape,
    unresolved,
)
from queueguard.revisions import SetFacts
from queueguard.stores import schema

__all__ = [
    "MATCHING_TABLES",
    "Matrix",
    "SchemaView",
    "build_matrix",
    "matrix_on_server",
    "range_bumps",
    "schema_view",
    "shape",
    "unresolved",
]

Verdict = Literal["unresolvable", "fenced", "runs"]


# the schema of one revision -----------------------------------------------------------------
@dataclass(frozen=True)
class SchemaView:
    """What a statement can see at one revision: tables, columns, the protocol row."""

    revision: str
    columns: Mapping[str, frozenset[str]]
    #: the single runtime_protocol row, None when the table is missing or not exactly one row
    protocol: tuple[int, int] | None

    @classmethod
    def from_catalog(
        cls, revision: str, cat: catalog_mod.Catalog, protocol: tuple[int, int] | None
    ) -> SchemaView:
        return cls(revision, {t: frozenset(cols) for t, cols in cat.columns.items()}, protocol)


def schema_view(dsn: str) -> SchemaView:
    """Introspect the database at `dsn` (read-only): revision, columns, protocol row."""
    with connection(dsn, application_name="queueguard-compat") as conn:
        cat = catalog_mod.introspect(conn)
        state = schema.inspect(conn)
        protocol = None
        if PROTOCOL_TABLE in cat.tables:
            rows = conn.execute(f"SELECT min_protocol, max_protocol FROM {PROTOCOL_TABLE}")
            found = rows.fetchall()
            protocol = (int(found[0][0]), int(found[0][1])) if len(found) == 1 else None
        conn.rollback()
    return SchemaView.from_catalog(state.revision or "", cat, protocol)


# classification ---------------------------------------------------------------------------
@dataclass(frozen=True)
class Cell:
    worker: str
    statement: str
    revision: str
    verdict: Verdict
    reason: str

    def as_json(self) -> dict[str, str]:
        return dict(self.__dict__)


@dataclass(frozen=True)
class Row:
    worker: str
    protocol: int | None
    own_revision: str
    statement: str
    role: str
    writes: tuple[str, ...]
    requires: tuple[str, ...]


def _handshake(protocol: int, view: SchemaView) -> tuple[Verdict, str]:
    if view.protocol is None:
        return "fenced", f"refuses protocol {protocol}: no single runtime_protocol row"
    low, high = view.protocol
    if low <= protocol <= high:
        return "runs", f"accepts protocol {protocol} in [{low}, {high}]"
    return "fenced", f"refuses protocol {protocol}: schema accepts [{low}, {high}]"


def classify(cat: StatementCatalog, name: str, view: SchemaView, bumps: Mapping[str, str]) -> Cell:
    """One statement of one legacy worker against one revision's schema."""
    statement = cat[name]

    def cell(verdict: Verdict, reason: str) -> Cell:
        return Cell(cat.worker, name, view.revision, verdict, reason)

    missing = unresolved(statement.sql, view.columns)
    if missing:
        return cell("unresolvable", "missing " + ", ".join(missing))
    facts = shape(statement.sql)
    if facts.reads_protocol and not facts.writes and cat.protocol is not None:
        return cell(*_handshake(cat.protocol, view))
    for required in statement.requires:
        before = classify(cat, required, view, bumps)
        if before.verdict != "runs":
            return cell("fenced", f"its transaction's {required} {before.verdict}: {before.reason}")
    if facts.writes_matching:
        if facts.unchecked_matching_writes:
            if statement.requires:
                return cell("runs", f"after {', '.join(statement.requires)} in its transaction")
            tables = ", ".join(sorted(facts.unchecked_matching_writes))
            return cell("runs", f"UNFENCED write to {tables}")
        bumped = [
            f"{r} ({f})" for r, f in sorted(bumps.items()) if cat.revision < r <= view.revision
        ]
        if bumped:
            return cell("fenced", f"range-checked; {', '.join(bumped)} bumped every range_id")
        return cell("runs", "range-checked; the loaded range still holds")
    if facts.writes & HISTORY_TABLES:
        return cell("runs", "History write: at-least-once, a repeated start is rejected")
    if facts.writes & USER_DATA_TABLES:
        return cell("runs", "user data: its own compare-and-swap, not range-fenced")
    return cell("runs", "read" if not facts.writes else "write")


@dataclass
class Matrix:
    revisions: list[str]
    rows: list[Row]
    cells: dict[tuple[str, str, str], Cell]
    head: str
    head_protocol: int

    def cell(self, worker: str, statement: str, revision: str) -> Cell:
        return self.cells[(worker, statement, revision)]

    def violations(self) -> list[str]:
        """Breaches of the safety property (empty: no old worker can strand or corrupt work)."""
        found = []
        for worker, protocol in sorted({(r.worker, r.protocol) for r in self.rows}, key=str):
            roles = {r.role for r in self.rows if r.worker == worker}
            if protocol is not None and protocol < self.head_protocol and "handshake" not in roles:
                found.append(f"{worker} speaks protocol {protocol} but has no handshake")
        for row in self.rows:
            if row.protocol is not None and row.protocol >= self.head_protocol:
                continue  # not an older protocol
            if row.own_revision in self.revisions:
                own = self.cell(row.worker, row.statement, row.own_revision)
                if own.verdict == "unresolvable":
                    found.append(
                        f"{row.worker} {row.statement} does not resolve on its own "
                        f"revision {row.own_revision}: {own.reason}"
                    )
            if self.head not in self.revisions:
                continue
            at_head = self.cell(row.worker, row.statement, self.head)
            if row.role == "handshake" and at_head.verdict != "fenced":
                found.append(f"{row.worker} handshake is not refused on {self.head}")
            if row.writes and set(row.writes) & MATCHING_TABLES and at_head.verdict == "runs":
                found.append(
                    f"{row.worker} {row.statement} writes Matching state on {self.head}: "
                    f"{at_head.reason}"
                )
        return found

    def as_json(self) -> dict[str, Any]:
        return {
            "revisions": self.revisions,
            "head": self.head,
            "safe": not self.violations(),
            "violations": self.violations(),
            "statements": [
                {
                    "worker": row.worker,
                    "statement": row.statement,
                    "role": row.role,
                    "writes": list(row.writes),
                    "cells": {
                        r: {
                            "verdict": self.cell(row.worker, row.statement, r).verdict,
                            "reason": self.cell(row.worker, row.statement, r).reason,
                        }
                        for r in self.revisions
                    },
                }
                for row in self.rows
            ],
        }

    def render(self) -> str:
        width = max([len("statement"), *(len(r.statement) for r in self.rows)])
        role_w = max([len("role"), *(len(r.role) for r in self.rows)])
        header = (
            f"{'worker':6} {'statement':{width}} {'role':{role_w}} "
            + " ".join(f"{r:12}" for r in self.revisions)
        ).rstrip()
        lines = [
            "compatibility of released workers with each schema revision "
            "(sqlglot against the introspected schema)",
            header,
            "-" * len(header),
        ]
        for row in self.rows:
            cells = " ".join(
                f"{self.cell(row.worker, row.statement, r).verdict:12}" for r in self.revisions
            )
            lines.append(
                f"{row.worker:6} {row.statement:{width}} {row.role:{role_w}} {cells}".rstrip()
            )
        if self.head in self.revisions:
            lines.append(f"\non {self.head}:")
            for row in self.rows:
                at_head = self.cell(row.worker, row.statement, self.head)
                if at_head.verdict != "unresolvable":
                    lines.append(
                        f"  {row.worker} {row.statement}: {at_head.verdict}, {at_head.reason}"
                    )
        problems = self.violations()
        lines.append(
            "\nno released worker can write Matching state on head"
            if not problems
            else "\nCOMPATIBILITY VIOLATIONS:\n  " + "\n  ".join(problems)
        )
        return "\n".join(lines)


def build_matrix(
    views: Iterable[SchemaView],
    catalogs: Iterable[StatementCatalog] | None = None,
    bumps: Mapping[str, str] | None = None,
    migrations: SetFacts | None = None,
) -> Matrix:
    migrations = migrations or revisions.packaged()
    views = sorted(views, key=lambda v: v.revision)
    catalogs = list(catalogs) if catalogs is not None else all_catalogs()
    bumps = range_bumps(migrations.root / "sql") if bumps is None else bumps
    rows, cells = [], {}
    for cat in catalogs:
        for name, statement in cat.statements.items():
            facts = shape(statement.sql)
            rows.append(
                Row(
                    cat.worker,
                    cat.protocol,
                    cat.revision,
                    name,
                    "write after " + "+".join(statement.requires)
                    if statement.requires and facts.unchecked_matching_writes
                    else facts.role,
                    tuple(sorted(facts.writes)),
                    statement.requires,
                )
            )
            for view in views:
                cells[(cat.worker, name, view.revision)] = classify(cat, name, view, bumps)
    head = migrations.head
    return Matrix([v.revision for v in views], rows, cells, head.id, head.protocol or 0)


def matrix_on_server(
    admin_dsn: str,
    databases: ScratchDatabases | None = None,
    migrations: SetFacts | None = None,
) -> Matrix:
    """Migrate one scratch database per revision on the server, introspect, build, drop."""
    migrations = migrations or revisions.packaged()
    views = []
    with ScratchDatabases(admin_dsn) as own:
        scratch = databases or own
        for revision in migrations.ids:
            dsn = scratch.create()
            upgrade(dsn, to=revision, progress=False, migrations=migrations)
            views.append(schema_view(dsn))
            scratch.drop(dsn)
    return build_matrix(views, migrations=migrations)
