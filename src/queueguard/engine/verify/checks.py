"""`queueguard verify --migrations DIR` for a set of another format (Temporal, sqldir,
Alembic): what the set does, revision by revision, and whether it does what it claims.

On scratch databases of one server (all dropped afterwards):
1. **chain**: an empty database is brought from nothing to head by `upgrade` (the engine's
   runner, the format's own bookkeeping), one revision at a time; each revision's statements
   are traced (`plan`'s tracer: locks as pg_locks names, rewrites, scans) on a second scratch
   database kept at the same revision, and timed (and their locks' hold) by the runner;
2. **rerun**: `upgrade` again at head applies nothing and changes no table's structure or
   rows; **bookkeeping**: the format's version table reads head;
3. **fresh** (`--fresh FILE`): the set's fresh-install script, run statement by statement on
   another scratch database, gives the catalog the chain gave, object by object (the
   format's bookkeeping tables and `queueguard_*` left out; column order only a note);
4. **fixture** (`--fixtures DIR`): each database frozen at an older revision is loaded, found
   at its revision, upgraded to head, and has the chain's catalog; **invariant**
   (`--invariants FILE`): each read-only query returns the same rows (as a multiset) before
   and after that upgrade.
The pure half (report, rendering, file names, row comparison) is `verify.report`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import psycopg

from queueguard.engine import catalog
from queueguard.engine.apply.runner import upgrade
from queueguard.engine.apply.session import Limits
from queueguard.engine.dumps import without_restrict
from queueguard.engine.plan import apply
from queueguard.engine.verify import data
from queueguard.engine.verify.chain import Progress, load_base, run_chain
from queueguard.engine.verify.fresh import Reloaded, against_fresh
from queueguard.engine.verify.report import (
    Check,
    FixtureFile,
    SetVerifyReport,
    fixture_files,
    multiset_diff,
    parse_invariants,
    rows_problems,
)
from queueguard.errors import QueueguardError, UsageError
from queueguard.pg.connect import connection
from queueguard.pg.scratch import ScratchDatabases, database_dsn
from queueguard.sets import MigrationSet
from queueguard.sets.model import heads_of
from queueguard.sets.split import split


def verify(
    mset: MigrationSet,
    admin_dsn: str,
    *,
    fresh: Path | None = None,
    base: Path | None = None,
    fixtures: Path | None = None,
    invariants: Path | None = None,
    limits: Limits | None = None,
    progress: Progress | None = None,
) -> SetVerifyReport:
    """Verify `mset` on scratch databases of the server at `admin_dsn` (see the module doc).
    Bad input (an unreadable file, a fixture named after no revision, invariants without
    fixtures) raises UsageError before any database is made."""
    started = time.monotonic()
    tell = progress or (lambda _line: None)
    fresh_text = _read(fresh, "--fresh") if fresh is not None else None
    if base is not None and not base.is_file():
        raise UsageError(f"--base {base}: no such file")
    queries = (
        parse_invariants(_read(invariants, "--invariants"), str(invariants)) if invariants else {}
    )
    if queries and fixtures is None:
        raise UsageError("--invariants are run on --fixtures: give a folder of fixtures")
    frozen = fixture_files(fixtures, mset) if fixtures is not None else []
    head = mset.resolve(None)  # a set at several heads: all of them (`model.state_of`)
    report = SetVerifyReport(mset.format, str(mset.root), head)
    leave_out = _leave_out(mset)
    if mset.conflicts or mset.independent:
        report.checks.append(heads_check(mset))
    with ScratchDatabases(admin_dsn, prefix="qgverify") as scratch:
        try:
            chain, watched = scratch.create(), scratch.create()
            reference: catalog.Catalog | None = None
            reloaded: Reloaded | None = None
            if load_base(base, (chain, watched), report) and run_chain(
                mset, chain, watched, report, limits, tell, based=base is not None
            ):
                report.checks.append(_rerun(mset, chain, limits))
                report.checks.append(_bookkeeping(mset, chain, head))
                reference = catalog.without(catalog.introspect(chain), leave_out)
                reloaded = Reloaded(scratch, chain, leave_out)
                if fresh is not None and fresh_text is not None:
                    tell(f"fresh install from {fresh.name}")
                    made = scratch.create()
                    report.checks.append(
                        _fresh(fresh, fresh_text, made, reference, leave_out, reloaded)
                    )
            # a chain that could not run still leaves each fixture to upgrade from its own
            # revision; without the chain's catalog they are compared with the first one's
            compared_with = "the chain's" if reference is not None else None
            for fixture in frozen:
                tell(f"fixture {fixture.path.name}")
                checks, upgraded = _fixture(
                    mset, fixture, scratch, (reference, reloaded), compared_with, queries, limits
                )
                report.checks += checks
                if reference is None and upgraded is not None:
                    reference, compared_with = upgraded, f"{fixture.path.name}'s"
                    reloaded = None  # a fixture's own: it went through a dump already
        finally:
            _drop_together(scratch)
    report.elapsed_ms = int((time.monotonic() - started) * 1000)
    return report


def heads_check(mset: MigrationSet) -> Check:
    """Several heads judged by what they are: a fork from a common ancestor nobody merged
    fails (two heads pass CI and then `upgrade head` fails at the deploy, or a tool that
    applies one head leaves the other's revisions out); heads that each end a history of
    their own (independent labelled bases) pass, said as a note — merging them is wrong."""
    notes = []
    if mset.independent:
        what, advice = mset.independent_text()
        notes.append(f"{what} ({advice})")
    if not mset.conflicts:
        return Check("heads", True, "independent histories, no fork to merge", notes=notes)
    problem, fix = mset.conflict_text()
    fix = fix.replace(" -m 'merge heads'", "")
    return Check("heads", False, f"{problem} ({fix})", notes=notes)


def _drop_together(scratch: ScratchDatabases) -> None:
    """Drop the scratch databases at once: each DROP DATABASE waits for a checkpoint, which
    concurrent drops share (one by one they took seconds each on a busy server)."""
    names = scratch.names
    with ThreadPoolExecutor(max_workers=max(1, len(names))) as pool:
        list(pool.map(scratch.drop, [database_dsn(scratch.admin_dsn, n) for n in names]))


def _read(path: Path, option: str) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"{option} {path}: cannot be read ({exc})") from None


def _leave_out(mset: MigrationSet) -> Callable[[str], bool]:
    """The tables no comparison looks at: the format's bookkeeping and anything of ours."""
    names = {name.rpartition(".")[2] for name in mset.bookkeeping}
    return lambda table: table in names or table.startswith("queueguard_")


def _rerun(mset: MigrationSet, chain: str, limits: Limits | None) -> Check:
    before_schema, before_rows = catalog.fingerprint(chain), catalog.contents(chain)
    try:
        again = upgrade(mset, chain, limits=limits)
    except QueueguardError as exc:
        return Check("rerun", False, "upgrade at head failed", problems=[str(exc)])
    problems = [f"applied {r} again" for r in again.applied]
    if catalog.fingerprint(chain) != before_schema:
        problems.append("the catalog fingerprint changed")
    after_rows = catalog.contents(chain)
    problems += [
        f"table {table}: its rows changed"
        for table in sorted(set(before_rows) | set(after_rows))
        if before_rows.get(table) != after_rows.get(table)
    ]
    if problems:
        return Check("rerun", False, "upgrade at head was not a no-op", problems=problems)
    return Check("rerun", True, "upgrade at head applied nothing and changed no table")


def _bookkeeping(mset: MigrationSet, dsn: str, head: str | None) -> Check:
    at = data.at_revision(mset, dsn)
    where = ", ".join(sorted(mset.bookkeeping)) or "its bookkeeping"
    if not mset.at_head(at):
        return Check(
            "bookkeeping",
            False,
            f"the format's bookkeeping ({where}) {_reads(mset, at)}, not head"
            + ("" if mset.format == "django" else f" {head}"),
        )
    return Check("bookkeeping", True, f"the format's bookkeeping ({where}) reads head {head}")


def _reads(mset: MigrationSet, at: str | None) -> str:
    """What a database's bookkeeping says, in a sentence (pure)."""
    if mset.format != "django":
        return f"reads {at}"
    missing = [r.id for r in mset.pending(at)]
    return f"lacks {len(missing)} migration(s): {', '.join(missing[:5])}" + (
        ", …" if len(missing) > 5 else ""
    )


# --- the fresh install -----------------------------------------------------------------------


def _fresh(
    path: Path,
    text: str,
    dsn: str,
    upgraded: catalog.Catalog,
    leave_out: Callable[[str], bool],
    reloaded: Reloaded,
) -> Check:
    try:
        # pg_dump's `\restrict KEY` lines (PostgreSQL 17.6, 18 and later) are psql's alone
        statements = split(without_restrict(text), source=str(path))
    except QueueguardError as exc:
        return Check("fresh", False, f"{path.name} cannot be read", problems=[str(exc)])
    with connection(dsn, autocommit=True) as conn:
        for n, statement in enumerate(statements, start=1):
            try:
                conn.execute(statement)
            except psycopg.Error as exc:
                return Check(
                    "fresh",
                    False,
                    f"{path.name} failed at statement {n}",
                    problems=[f"{apply.first_line(exc)}: {' '.join(statement.split())[:200]}"],
                )
    problems, notes = against_fresh(upgraded, catalog.introspect(dsn), leave_out, reloaded)
    if problems:
        detail = f"{len(problems)} difference(s) between the upgraded and the fresh catalog"
        return Check("fresh", False, detail, problems=problems, notes=notes)
    detail = f"{path.name} ({len(statements)} statements) gives the upgraded catalog"
    return Check("fresh", True, detail, notes=notes)


# --- fixtures and invariants -----------------------------------------------------------------


def _fixture(
    mset: MigrationSet,
    fixture: FixtureFile,
    scratch: ScratchDatabases,
    against: tuple[catalog.Catalog | None, Reloaded | None],
    compared_with: str | None,
    queries: dict[str, str],
    limits: Limits | None,
) -> tuple[list[Check], catalog.Catalog | None]:
    """The fixture loaded, found at its revision, upgraded to head and compared with
    `reference` (the chain's catalog, else an earlier fixture's; None: the first of them);
    its checks, and its upgraded catalog."""
    name = fixture.path.name
    reference, reloaded = against
    dsn = scratch.create()
    notes: list[str] = []

    def failed(detail: str, *problems: str) -> tuple[list[Check], None]:
        return [Check("fixture", False, detail, name, list(problems), notes)], None

    try:
        data.load_fixture(fixture, dsn)
    except data.LoadFailed as exc:
        return failed("could not be loaded", str(exc))
    adopted = data.adopt(mset, dsn)
    if adopted:
        notes.append(adopted)
    try:
        at = data.at_revision(mset, dsn)
    except QueueguardError as exc:  # e.g. Temporal rows of several other databases' names
        return failed("its bookkeeping cannot be read", str(exc))
    where = ", ".join(sorted(mset.bookkeeping)) or "its bookkeeping"
    if mset.format == "django" and fixture.revision not in heads_of(at):
        # a Django database has applied a set of migrations: its name says one of them
        return failed(f"{where} does not hold {fixture.revision}, which its name says")
    if mset.format != "django" and at != fixture.revision:
        return failed(
            f"is at {at or 'no revision'} by {where}, but its name says {fixture.revision}"
        )
    before = data.invariant_rows(dsn, queries)
    try:
        report = upgrade(mset, dsn, limits=limits)
    except QueueguardError as exc:
        return failed(f"upgrade from {fixture.revision} failed", str(exc))
    after = data.invariant_rows(dsn, queries)
    mine = catalog.without(catalog.introspect(dsn), _leave_out(mset))
    head = mset.resolve(None)  # a set at several heads: all of them (`model.state_of`)
    short = "" if mset.format == "django" else f", not {head}"  # Django's names what it lacks
    problems = (
        []
        if mset.at_head(report.after)
        else [f"its bookkeeping {_reads(mset, report.after)}{short}"]
    )
    if reference is not None:
        labels = ("chain", "fixture") if compared_with == "the chain's" else ("first", "fixture")
        if reloaded is not None:  # a fixture's objects came from a dump: the chain's did not
            problems += reloaded.compare(reference, mine, labels, notes)
        else:
            problems += catalog.differences(reference, mine, labels)
    else:
        notes.append("the chain did not reach head: no catalog to compare this fixture's with")
    applied = ", ".join(report.applied) or "nothing"
    differs = f"; its catalog differs from {compared_with}" if reference is not None else ""
    checks = [
        Check(
            "fixture",
            not problems,
            f"loaded at {fixture.revision}, upgraded to "
            f"{'head' if mset.format == 'django' and not problems else report.after} "
            f"(applied {applied})" + (differs if problems else ""),
            name,
            problems,
            notes,
        )
    ]
    for query_name in queries:
        checks.append(invariant_check(query_name, name, before[query_name], after[query_name]))
    return checks, mine


def invariant_check(name: str, fixture: str, before: Any, after: Any) -> Check:
    """One invariant's rows before and after an upgrade of `fixture`, as a check (pure)."""
    subject = f"{name} on {fixture}"
    for when, rows in (("before", before), ("after", after)):
        if isinstance(rows, str):
            return Check(
                "invariant", False, f"the query failed {when} the upgrade", subject, [rows]
            )
    only_before, only_after = multiset_diff(before, after)
    if only_before or only_after:
        detail = f"{len(only_before)} row(s) only before, {len(only_after)} only after the upgrade"
        return Check("invariant", False, detail, subject, rows_problems(only_before, only_after))
    return Check("invariant", True, f"{len(before)} row(s), the same after the upgrade", subject)
