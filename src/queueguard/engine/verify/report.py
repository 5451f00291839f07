"""`verify --migrations DIR` for a set of another format, the pure half: the report and its text
and JSON renderings, the fixture file names (`<revision>--<name>.sql|.dump`), the invariants file
(`-- name: NAME` blocks) and the multiset comparison of an invariant's rows.

Nothing here opens a connection; `verify.checks` and `verify.data` do.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from queueguard.errors import UsageError
from queueguard.pg.sqlfiles import parse_named
from queueguard.report.units import duration_s
from queueguard.sets import MigrationSet
from queueguard.sets.model import heads_of, one_revision

#: what separates a fixture's revision from its name: `0.2--two-kennels.sql`
FIXTURE_SEPARATOR = "--"
FIXTURE_KINDS = {".sql": "sql", ".dump": "dump"}
#: rows shown per side when an invariant's rows differ
SHOWN_ROWS = 5


# --- the report ------------------------------------------------------------------------------


@dataclass
class Statement:
    """One statement of a revision as the tracer saw it, with the runner's timing."""

    index: int  # 1-based, its place in the revision (Alembic: in the order it was sent)
    sql: str
    transactional: bool
    locks: list[tuple[str, str]] = field(default_factory=list)  # (relation, pg_locks mode)
    created: list[str] = field(default_factory=list)
    rewrites: list[str] = field(default_factory=list)
    scans: list[str] = field(default_factory=list)
    seconds: float = 0.0  # the runner's, else the tracer's
    held_s: float | None = None  # the runner's: from its start to its transaction's end

    def document(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "sql": self.sql,
            "transactional": self.transactional,
            "locks": [{"relation": rel, "mode": mode} for rel, mode in self.locks],
            "created": self.created,
            "rewrites": self.rewrites,
            "scans": self.scans,
            "seconds": round(self.seconds, 6),
            "heldSeconds": None if self.held_s is None else round(self.held_s, 6),
        }


@dataclass
class RevisionTrace:
    id: str
    title: str
    statements: list[Statement] = field(default_factory=list)
    error: str | None = None

    def document(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "title": self.title,
            "ok": self.error is None,
            "error": self.error,
            "statements": [s.document() for s in self.statements],
        }


@dataclass
class Check:
    """One check: `name` says which (chain, rerun, bookkeeping, fresh, fixture, invariant),
    `subject` what it ran on (a fixture file, `invariant on fixture`), `problems` one line
    each, `notes` what is worth saying without failing it."""

    name: str
    ok: bool
    detail: str = ""
    subject: str | None = None
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def document(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "subject": self.subject,
            "ok": self.ok,
            "detail": self.detail,
            "problems": self.problems,
            "notes": self.notes,
        }


@dataclass
class SetVerifyReport:
    format: str
    root: str
    head: str | None
    revisions: list[RevisionTrace] = field(default_factory=list)
    checks: list[Check] = field(default_factory=list)
    elapsed_ms: int = 0

    @property
    def ok(self) -> bool:
        return bool(self.checks) and all(c.ok for c in self.checks)

    def document(self) -> dict[str, Any]:
        return {
            "schemaVersion": 1,
            "format": self.format,
            "migrations": self.root,
            # one revision, null at several heads; `heads` says which (as plan and status)
            "head": one_revision(self.head),
            "heads": list(heads_of(self.head)),
            "ok": self.ok,
            "elapsed_ms": self.elapsed_ms,
            "revisions": [r.document() for r in self.revisions],
            "checks": [c.document() for c in self.checks],
        }


# --- text ------------------------------------------------------------------------------------


def _short(sql: str, width: int = 70) -> str:
    text = " ".join(sql.split())
    return text if len(text) <= width else text[: width - 3] + "..."


def _statement_lines(s: Statement) -> list[str]:
    locks = ", ".join(f"{rel} {mode}" for rel, mode in s.locks) or "no lock on existing tables"
    what = []
    if s.rewrites:
        what.append("rewrites " + ", ".join(s.rewrites))
    if s.scans:
        what.append("scans " + ", ".join(s.scans))
    if s.created:
        what.append("creates " + ", ".join(s.created))
    kind = "" if s.transactional else " (outside a transaction)"
    held = "" if s.held_s is None else f", locks held {duration_s(s.held_s)}"
    return [
        f"  {s.index:>3}. {_short(s.sql)}{kind}",
        f"       {locks}; {'; '.join(what) or 'catalog only'}",
        f"       ran {duration_s(s.seconds)}{held}",
    ]


def render_text(report: SetVerifyReport) -> str:
    lines = [
        f"verify ({report.format}) {report.root}: {len(report.revisions)} revision(s) "
        f"applied of head {report.head}"
    ]
    for rev in report.revisions:
        title = f" ({rev.title})" if rev.title else ""
        count = f"{len(rev.statements)} statement(s)" if rev.statements or rev.error else None
        lines.append(f"revision {rev.id}{title}: {count or 'no statement on PostgreSQL'}")
        for statement in rev.statements:
            lines.extend(_statement_lines(statement))
        if rev.error:
            lines.append(f"  FAILED: {rev.error}")
    lines.append("checks:")
    for check in report.checks:
        subject = f" {check.subject}" if check.subject else ""
        lines.append(f"  {'ok  ' if check.ok else 'FAIL'} {check.name}{subject}: {check.detail}")
        lines.extend(f"         {problem}" for problem in check.problems)
        lines.extend(f"         note: {note}" for note in check.notes)
    failed = sum(not c.ok for c in report.checks)
    verdict = (
        "every check passed"
        if report.ok
        else f"VERIFY FAILED ({failed} of {len(report.checks)} checks)"
    )
    lines.append(f"{verdict} ({report.elapsed_ms} ms)")
    return "\n".join(lines)


# --- fixtures --------------------------------------------------------------------------------


@dataclass(frozen=True)
class FixtureFile:
    """A database frozen at `revision`: a psql script (`sql`) or a `pg_dump -Fc` archive
    (`dump`)."""

    path: Path
    revision: str
    name: str
    kind: str


def _revision_of(mset: MigrationSet, written: str) -> str | None:
    for candidate in (written, written.removeprefix("v")):
        if candidate in mset.ids:
            return candidate
    return None


def fixture_files(folder: Path, mset: MigrationSet) -> list[FixtureFile]:
    """The fixtures in `folder`, by name: `<revision>--<name>.sql` or `.dump`; other files
    are ignored. A fixture naming a revision the set does not have is an error."""
    if not folder.is_dir():
        raise UsageError(f"--fixtures {folder}: not a directory")
    found = []
    for path in sorted(folder.iterdir()):
        kind = FIXTURE_KINDS.get(path.suffix)
        if kind is None or not path.is_file():
            continue
        written, sep, name = path.stem.partition(FIXTURE_SEPARATOR)
        if not sep or not written or not name:
            raise UsageError(
                f"{path}: a fixture is named <revision>{FIXTURE_SEPARATOR}<name>{path.suffix} "
                f"(e.g. {mset.ids[0] if mset.ids else '0001'}{FIXTURE_SEPARATOR}small"
                f"{path.suffix})"
            )
        revision = _revision_of(mset, written)
        if revision is None:
            raise UsageError(
                f"{path}: revision {written!r} is not one of {mset.root} ({mset.span})"
            )
        found.append(FixtureFile(path, revision, name, kind))
    if not found:
        raise UsageError(
            f"--fixtures {folder}: no <revision>{FIXTURE_SEPARATOR}<name>.sql or .dump files"
        )
    return found


# --- invariants ------------------------------------------------------------------------------


def parse_invariants(text: str, where: str) -> dict[str, str]:
    """{name: query} of an invariants file: `-- name: NAME` blocks, each one read-only query
    (a trailing `;` is dropped)."""
    try:
        found = parse_named(text)
    except ValueError as exc:
        raise UsageError(f"{where}: {exc}") from None
    if not found:
        raise UsageError(f"{where}: no `-- name: NAME` block (names are lower case, a-z0-9_)")
    queries = {}
    for name, body in found.items():
        query = body.strip().rstrip(";").strip()
        if not query:
            raise UsageError(f"{where}: invariant {name} has no query")
        queries[name] = query
    return queries


def freeze(value: Any) -> Any:
    """A row value made hashable (arrays and JSON documents), so rows count as a multiset."""
    if isinstance(value, list | tuple):
        return tuple(freeze(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((str(k), freeze(v)) for k, v in value.items()))
    return value


def multiset_diff(
    before: Iterable[Sequence[Any]], after: Iterable[Sequence[Any]]
) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """The rows only before and only after, each as often as it is in excess (a row twice
    before and once after is once "only before")."""
    a = Counter(tuple(freeze(v) for v in row) for row in before)
    b = Counter(tuple(freeze(v) for v in row) for row in after)
    return sorted((a - b).elements(), key=repr), sorted((b - a).elements(), key=repr)


def row_text(row: Sequence[Any]) -> str:
    """A row as SQL would write its values: `(1, 'a', NULL, true)` (a list or object value
    as JSON), never Python's repr."""

    def value(v: Any) -> str:
        if v is None:
            return "NULL"
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, str):
            return "'" + v.replace("'", "''") + "'"
        if isinstance(v, tuple):
            return json.dumps(v, default=str, ensure_ascii=False)
        return str(v)

    return "(" + ", ".join(value(v) for v in row) + ")"


def rows_problems(
    only_before: list[tuple[Any, ...]], only_after: list[tuple[Any, ...]], limit: int = SHOWN_ROWS
) -> list[str]:
    """A few of each side's rows, one line each, and how many more."""
    out = []
    for label, rows in (("only before", only_before), ("only after", only_after)):
        for row in rows[:limit]:
            out.append(f"{label}: {row_text(row)}")
        if len(rows) > limit:
            out.append(f"{label}: … {len(rows) - limit} more row(s)")
    return out
