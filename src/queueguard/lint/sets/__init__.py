"""`queueguard lint` on a migration set of another format (Temporal, Alembic, a plain SQL
directory): squawk's rules, one finding per statement.

The set is read with `sets.load`; squawk runs on each revision's files as on any file (the
same pinned binary and flags, `lint.squawk`); each finding is put on the statement holding
it (`statements`); each statement keeps the finding that matters by `rank`'s tiers and
counts the rest. With a target database, `plan`'s trace of the pending revisions replaces
squawk's guess by what PostgreSQL did (`rank.observed`). See docs/lint.md, "A migration
set of another format".
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from queueguard import sets
from queueguard.engine.plan.bill import Line, document
from queueguard.errors import QueueguardError, SplitError, UsageError
from queueguard.lint import squawk
from queueguard.lint.model import Finding, SqlFile
from queueguard.lint.sets import rank
from queueguard.lint.sets.report import Flagged, SetLintReport
from queueguard.lint.sets.statements import Located, containing, locate, server_text
from queueguard.sets import MigrationSet, Revision, sql_markers
from queueguard.sets.split import split

__all__ = ["SetLintReport", "detect_set", "lint_set", "set_of_file"]


def detect_set(path: Path) -> MigrationSet | None:
    """The set of another format at `path` when `lint PATH` should read it as one: a Temporal or
    Alembic set, or a directory whose every .sql file is a versioned migration. None for
    anything else, queueguard's own set included (it keeps the gate of `lint.lint`)."""
    if not path.is_dir() or path.name == "audit_queries":
        return None
    try:
        found = sets.detect(path)
    except UsageError:
        return None
    if found == "queueguard":
        return None
    try:
        return sets.load(path, found)
    except UsageError:
        if found == "sqldir":  # .sql files, but not a versioned line: lint them one by one
            return None
        raise


def set_of_file(path: Path) -> MigrationSet | None:
    """The set of another format whose revisions apply the file at `path` (how `lint FILE` and the
    pre-commit hook lint a changed file as part of its set): the nearest folder above it that
    is a Temporal or an Alembic set, else the file's own folder as a plain SQL directory.
    None when no such set applies it; queueguard's own set's step files stay with the gate
    (`lint.lint` already lints them with their revision)."""
    path = path.resolve()
    for folder in path.parents:
        try:
            found = sets.detect(folder)
        except UsageError:
            found = None
        if found == "queueguard":
            return None
        if found in ("temporal", "alembic"):
            mset = sets.load(folder, found)
            if any(path in _paths(r, mset.root) for r in mset.revisions):
                return mset
        if (folder / ".git").exists():  # the repository's root: no set reaches above it
            break
    plain = detect_set(path.parent)
    if plain is not None and any(path in _paths(r, plain.root) for r in plain.revisions):
        return plain
    return None


def _paths(revision: Revision, root: Path) -> list[Path]:
    """The files a revision applies, as absolute paths (Temporal lists them relative to
    their version folder)."""
    manifest = revision.native.get("manifest")
    folder = Path(manifest).parent if manifest else root
    return [(p if p.is_absolute() else folder / p).resolve() for p in revision.files]


def _read(path: Path) -> SqlFile:
    """A file as the upgrade reads it: a goose or dbmate file's up section alone."""
    try:
        found = SqlFile.read(path, "migration")
    except (OSError, UnicodeDecodeError) as exc:
        raise QueueguardError(f"lint: cannot read {path}: {exc}") from None
    return replace(found, text=sql_markers.up_text(found.text))


Key = tuple[str, int]  # (revision, statement index in it)


class _Statements:
    """Every SQL statement of the set, by file and by (revision, index)."""

    def __init__(self, mset: MigrationSet, traced: dict[str, list[str]] | None = None) -> None:
        self.files: dict[Path, SqlFile] = {}
        self.located: dict[Path, list[Located]] = {}
        #: a file's first listing: its revision and the index of its first statement there
        self.first: dict[Path, Key] = {}
        self.by_key: dict[Key, tuple[Path, Located]] = {}
        self.python: list[str] = []
        #: a Django project's statements, captured from its migrate on a scratch database;
        #: an Alembic revision's, traced on a copy of the target (`--dsn`): what ran there
        self.captured: dict[str, list[str]] | None = traced or None
        if mset.format == "django":
            from queueguard.engine.formats.django.trace import captured_sql

            self.captured = captured_sql(mset)
        for revision in mset.revisions:
            if revision.statements is None:
                self._rendered(mset, revision)
                continue
            base = 0
            for path in _paths(revision, mset.root):
                if path not in self.files:
                    self.files[path] = _read(path)
                    self.located[path] = locate(self.files[path].text)
                    self.first[path] = (revision.id, base)
                for stmt in self.located[path]:
                    self.by_key[(revision.id, base + stmt.index)] = (path, stmt)
                base += len(self.located[path])

    def _rendered(self, mset: MigrationSet, revision: Revision) -> None:
        """A Python revision: linted as the statements it sent where they were captured (a
        Django migration's migrate; an Alembic revision traced on a copy of the target),
        else as `alembic upgrade --sql` renders it (squawk's usual input); one that cannot
        render offline is only counted."""
        from queueguard.sets import alembic as alembic_format

        text: str | None
        if self.captured is not None and revision.id in self.captured:
            text = "".join(f"{server_text(sql)};\n" for sql in self.captured[revision.id])
        elif mset.format == "alembic":
            text = alembic_format.render(mset, revision.id)
        else:
            text = None
        if not text:
            self.python.append(revision.id)
            return
        path = revision.files[0].resolve()
        self.files[path] = SqlFile(path, "migration", text)
        self.located[path] = locate(text)
        self.first[path] = (revision.id, 0)
        for stmt in self.located[path]:
            self.by_key[(revision.id, stmt.index)] = (path, stmt)

    def key_of(self, finding: Finding) -> Key | None:
        """The statement holding a finding (in the first listing of a file listed twice)."""
        stmt = containing(self.located.get(finding.path, []), finding.line, finding.column)
        if stmt is None:
            return None
        revision, base = self.first[finding.path]
        return revision, base + stmt.index


def _observe(
    mset: MigrationSet, dsn: str, scratch_admin: str | None
) -> tuple[str | None, list[str], dict[str, list[Line]]]:
    """`plan`'s bill of the pending revisions on a copy of the target, by revision."""
    from queueguard.engine.plan.planner import plan

    result = plan(mset, dsn, scratch_admin=scratch_admin)
    return result.current, [rid for rid, _ in result.revisions], dict(result.revisions)


def _matched(
    mset: MigrationSet, bills: dict[str, list[Line]], found: _Statements
) -> dict[Key, Line]:
    """Each traced line matched, in order, to the statement it ran, by text: a SQL
    revision's file (transaction control is not traced); a Python revision's linted text
    (its traced statements themselves, or Django's capture on an empty database, where a
    statement that ran on one side only is left unmatched). One execute that sent several
    statements (`op.execute("A; B")`) is one traced line: each of them is matched to it,
    the observation of them together."""
    lines: dict[Key, Line] = {}
    for rid, bill_lines in bills.items():
        statements = mset.get(rid).statements
        if statements is None:
            keys = sorted(k[1] for k in found.by_key if k[0] == rid)
            texts = [_bare(found.by_key[(rid, i)][1].sql) for i in keys]
            ran = [
                (_bare(part), line)
                for line in bill_lines
                for part in _parts(server_text(line.seen.sql))
            ]
        else:
            keys, texts = list(range(len(statements))), list(statements)
            ran = [(line.seen.sql, line) for line in bill_lines]
        at = 0
        for index, sql in zip(keys, texts, strict=True):
            hit = next((j for j in range(at, len(ran)) if ran[j][0] == sql), None)
            if hit is not None:
                lines[(rid, index)] = ran[hit][1]
                at = hit + 1
    return lines


def _parts(sql: str) -> list[str]:
    """The statements one traced execute sent (itself when it cannot be split)."""
    try:
        return split(sql) or [sql]
    except SplitError:
        return [sql]


def _bare(sql: str) -> str:
    return sql.strip().rstrip(";").strip()


def lint_set(
    mset: MigrationSet,
    *,
    dsn: str | None = None,
    scratch_admin: str | None = None,
    squawk_binary: Path | None = None,
    only: Sequence[Path] | None = None,
) -> SetLintReport:
    """Lint a set of another format: one finding per statement; with `dsn`, observed on a copy
    of it. `only`: report the statements of these files alone (squawk reads each file on its own,
    so the rest of the set changes nothing about them)."""
    # squawk found (and its version checked) first: a missing one is said before the
    # statements are traced or captured (a Django project's capture takes its migrate's time)
    binary = squawk_binary or squawk.locate()
    version: str | None = squawk.checked_version(binary)
    target_at: str | None = None
    traced: list[str] | None = None
    bills: dict[str, list[Line]] = {}
    if dsn is not None:
        target_at, traced, bills = _observe(mset, dsn, scratch_admin)
    python = {
        rid: [line.seen.sql for line in lines]
        for rid, lines in bills.items()
        if mset.format == "alembic" and mset.get(rid).statements is None
    }
    found = _Statements(mset, python)
    wanted = {p.resolve() for p in only} if only is not None else set(found.files)
    files = [f for path, f in found.files.items() if path in wanted]
    findings: list[Finding] = []
    if files:
        findings = squawk.run(files, binary)
    else:
        version = None  # squawk read nothing
    grouped: dict[Key, list[Finding]] = defaultdict(list)
    for finding in findings:
        key = found.key_of(finding)
        if key is None:  # a file without statements: unlikely, but never dropped
            key = (found.first[finding.path][0], -1)
        grouped[key].append(finding)
    observed = _matched(mset, bills, found)
    order = {rid: i for i, rid in enumerate(mset.ids)}
    keys = sorted(set(grouped) | set(observed), key=lambda k: (order.get(k[0], len(order)), k[1]))
    flagged = [
        entry
        for key in keys
        if (entry := _flag(key, grouped.get(key, []), observed.get(key), found)) is not None
        and entry.path.resolve() in wanted
    ]
    if (mset.conflicts or mset.independent) and only is None:
        flagged.insert(0, _multiple_heads(mset))
    return SetLintReport(
        format=mset.format,
        root=mset.root,
        flagged=tuple(flagged),
        files=len(files),
        squawk_version=version,
        python_revisions=tuple(found.python),
        target_at=target_at,
        traced=tuple(traced) if traced is not None else None,
    )


def _multiple_heads(mset: MigrationSet) -> Flagged:
    """A set with several heads, said at the last head's file: a fork nobody merged fails
    (two heads pass CI, then `alembic upgrade head` fails at the deploy; a tool that applies
    one head leaves the other's revisions out); heads that each end an independent history
    (labelled bases of their own) are a note whose advice never merges them."""
    if mset.conflicts:
        head = mset.get(mset.conflicts[-1])
        cost, fix = mset.conflict_text()
        tier = rank.Tier.FAILS
    else:
        head = mset.get(mset.independent[-1])
        cost, fix = mset.independent_text()
        tier = rank.Tier.NOTE
    path = head.files[0].resolve()
    finding = Finding("migration.multiple_heads", path, 1, 1, cost, fix)
    return Flagged(head.id, -1, path, 1, 1, "", (finding,), finding, tier, cost)


def _flag(
    key: Key, findings: Sequence[Finding], line: Line | None, found: _Statements
) -> Flagged | None:
    """The entry of one statement: squawk's chosen finding, its cost guessed from the rule or,
    with a trace, observed (None: no finding and nothing costly observed)."""
    findings = sorted(findings, key=lambda f: (f.line, f.column, f.code))
    if key in found.by_key:
        path, stmt = found.by_key[key]
        place: dict[str, Any] = {"path": path, "line": stmt.line, "column": stmt.column}
        sql = stmt.sql
    else:
        place, sql = {"path": findings[0].path, "line": findings[0].line, "column": 1}, ""
    chosen = rank.choose(findings) if findings else None
    seen = rank.observed(line) if line is not None else None
    common: dict[str, Any] = {
        "revision": key[0],
        "index": key[1],
        **place,
        "sql": sql,
        "findings": tuple(findings),
        "chosen": chosen,
        "observation": document(line) if line is not None else None,
    }
    if chosen is None:
        if seen is None or seen.tier is rank.Tier.NOTE:
            return None  # nothing squawk saw, nothing costly observed
        return Flagged(**common, tier=seen.tier, cost=seen.cost)
    guess = rank.static_cost(chosen, sql)
    if seen is None:
        return Flagged(**common, tier=rank.tier_of(chosen), cost=guess)
    static = rank.tier_of(chosen)
    if seen.tier > static:  # a cost squawk's rules did not name: the trace's finding leads
        common["chosen"] = None
    return Flagged(**common, tier=seen.tier, cost=seen.cost, guess=(static, guess))
