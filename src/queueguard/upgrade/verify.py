"""`queueguard verify`: upgrade CI against every golden fixture.

Per fixture, each in fresh databases cloned from a template (CREATE DATABASE … TEMPLATE):
load → preflight (expect no blocking finding) → upgrade to head → compare with the golden
state and the golden rows (every column: `upgrade.rows`) → compare the catalog with a fresh
install → upgrade step by step to the same state → re-run the upgrade and prove it changed
nothing → the protocol fence: released v0.2/v0.3 workers (`upgrade.legacy`) started around the
upgrade all fail and change nothing → contention: a lock held elsewhere makes upgrade give up
within its ladder, changing nothing (`upgrade.contention`) → on v0.3, every negative case
refused unchanged (`upgrade.refusals`) → the online path (`_online`). Once per run,
the static compatibility matrix (`compat`) of those workers' statements × every revision.
Scratch databases are ours (prefix `qg`) and are dropped afterwards; no other database is
touched.
"""

from __future__ import annotations

import difflib
import itertools
import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

from queueguard import revisions, snapshot
from queueguard.errors import QueueguardError
from queueguard.pg.connect import connection
from queueguard.pg.scratch import ScratchDatabases, dbname_of
from queueguard.revisions import SetFacts
from queueguard.style import paint
from queueguard.upgrade import (
    audit,
    catalog,
    compat,
    contention,
    golden,
    legacy,
    online,
    refusals,
    rows,
    state,
    status,
)
from queueguard.upgrade.checksums import table_checksums
from queueguard.upgrade.golden import Fixture, all_fixtures, get, load
from queueguard.upgrade.manifest import online_files
from queueguard.upgrade.online import edges, equivalence
from queueguard.upgrade.online.probe import NAMESPACE, Fleet, probe
from queueguard.upgrade.preflight import preflight as run_preflight
from queueguard.upgrade.runner import upgrade


@dataclass
class Check:
    name: str
    ok: bool
    detail: str = ""


@dataclass
class FixtureResult:
    fixture: str
    revision: str
    checks: list[Check] = field(default_factory=list)
    elapsed_ms: int = 0

    @property
    def ok(self) -> bool:
        return all(c.ok for c in self.checks)

    def as_json(self) -> dict[str, Any]:
        return {
            "fixture": self.fixture,
            "revision": self.revision,
            "ok": self.ok,
            "elapsed_ms": self.elapsed_ms,
            "checks": [c.__dict__ for c in self.checks],
        }


@dataclass
class VerifyReport:
    results: list[FixtureResult]
    elapsed_ms: int
    compatibility: compat.Matrix | None = None

    @property
    def ok(self) -> bool:
        matrix_ok = self.compatibility is None or not self.compatibility.violations()
        return matrix_ok and all(r.ok for r in self.results)

    def as_json(self) -> dict[str, Any]:
        return {
            "schemaVersion": 1,
            "ok": self.ok,
            "elapsed_ms": self.elapsed_ms,
            "fixtures": [r.as_json() for r in self.results],
            "compatibility": self.compatibility.as_json() if self.compatibility else None,
        }


def state_diff(expected: dict[str, Any], actual: dict[str, Any], limit: int = 60) -> str:
    """A readable unified diff of two normalised state documents."""
    return json_diff(snapshot.normalise(expected), snapshot.normalise(actual), limit=limit)


def json_diff(
    expected: Any, actual: Any, labels: tuple[str, str] = ("golden", "upgraded"), limit: int = 60
) -> str:
    """A readable unified diff of two JSON documents."""

    def lines(doc: Any) -> list[str]:
        return json.dumps(doc, indent=1, ensure_ascii=False, sort_keys=True).splitlines()

    diff = list(difflib.unified_diff(lines(expected), lines(actual), *labels, lineterm="", n=2))
    more = f"\n… {len(diff) - limit} more diff lines" if len(diff) > limit else ""
    return "\n".join(diff[:limit]) + more


def _export(dsn: str) -> dict[str, Any]:
    with connection(dsn) as conn:
        return state.export_database(conn)


def _clock(dsn: str) -> datetime:
    with connection(dsn) as conn:
        return rows.clock(conn)


def _whole(dsn: str, since: datetime, migrations: SetFacts) -> rows.Doc:
    with connection(dsn) as conn:
        return rows.export_upgraded(conn, since, migrations)


def _checksums(dsn: str) -> dict[str, str]:
    with connection(dsn) as conn:
        return table_checksums(conn)


def _catalog(dsn: str) -> Any:
    with connection(dsn) as conn:
        return catalog.introspect(conn)


def verify_fixture(
    fixture: Fixture,
    scratch: ScratchDatabases,
    fresh_catalog: Any,
    preflight: Callable[[str], tuple[bool, str]] | None,
    migrations: SetFacts,
    frozen_catalog: dict[str, Any] | None = None,
    *,
    online_only: bool = False,
    fail_fast: bool = False,
) -> FixtureResult:
    """Every check of one fixture. `online_only`: only the online path's (what a change to
    the online SQL alone can affect); `fail_fast`: stop at the first failing check (one
    witness is enough). `queueguard mutate` uses both."""
    started = time.monotonic()
    result = FixtureResult(fixture.name, fixture.revision)
    checks = result.checks
    template = scratch.create()
    load(fixture, template)
    with connection(template) as conn:
        fingerprint = catalog.fingerprint(conn)
    expected_fp = fixture.manifest["schema_sha256"]
    checks.append(
        Check(
            "schema",
            fingerprint == expected_fp,
            ""
            if fingerprint == expected_fp
            else f"loaded schema fingerprint {fingerprint[:12]} != manifest {expected_fp[:12]}",
        )
    )
    template_name = dbname_of(template)

    if preflight is not None:
        db = scratch.create(template_name)
        ok, detail = preflight(db)
        checks.append(Check("preflight", ok, detail))

    db = scratch.create(template_name)
    since = _clock(db)
    report = upgrade(db, progress=False, migrations=migrations)
    checks.append(
        Check(
            "upgrade",
            report.after == migrations.head.id,
            f"{report.before} -> {report.after} in {report.elapsed_ms} ms",
        )
    )
    actual = _export(db)
    whole = _whole(db, since, migrations)
    offline = (
        []  # the offline path's checks read no online file
        if online_only
        else _offline_checks(
            fixture,
            scratch,
            template_name,
            db,
            (actual, whole),
            fresh_catalog,
            frozen_catalog,
            migrations,
        )
    )
    online_check = lazy(
        _online, fixture, scratch, template_name, db, fresh_catalog, migrations, fail_fast
    )
    for check in itertools.chain(offline, online_check):
        checks.append(check)
        if fail_fast and not check.ok:
            break
    result.elapsed_ms = int((time.monotonic() - started) * 1000)
    return result


def lazy(check: Callable[..., Check], *args: Any) -> Iterator[Check]:
    """One check, run only when asked for (so a caller that stops early skips it)."""
    yield check(*args)


def _offline_checks(
    fixture: Fixture,
    scratch: ScratchDatabases,
    template_name: str,
    db: str,
    exported: tuple[dict[str, Any], rows.Doc],
    fresh_catalog: Any,
    frozen_catalog: dict[str, Any] | None,
    migrations: SetFacts,
) -> Iterator[Check]:
    """golden, rows, catalog, frozen, invariants, idempotent, stepwise, fence, one at a time
    (a caller may stop at the first that fails): `db` is the fixture upgraded offline,
    `exported` its state document and its whole rows."""
    actual, whole = exported
    same = snapshot.normalise(actual) == snapshot.normalise(fixture.expected_head)
    yield Check("golden", same, "" if same else state_diff(fixture.expected_head, actual))
    yield _rows_check(fixture.expected_rows, whole)

    upgraded_catalog = _catalog(db)
    differences = catalog.diff(fresh_catalog, upgraded_catalog)
    yield Check("catalog", not differences, "\n".join(differences[:30]))
    yield _frozen(frozen_catalog, upgraded_catalog)
    yield _invariants(db, migrations)

    before = _checksums(db)
    again = upgrade(db, progress=False, migrations=migrations)
    after = _checksums(db)
    changed = [t for t in before if before[t] != after.get(t)]
    yield Check(
        "idempotent",
        not again.applied and not changed,
        f"changed tables: {changed}" if changed else "no-op",
    )

    stepwise = scratch.create(template_name)
    since = _clock(stepwise)
    for revision in migrations.pending(fixture.revision, migrations.head.id):
        upgrade(stepwise, to=revision.id, progress=False, migrations=migrations)
    same_steps = snapshot.normalise(_export(stepwise)) == snapshot.normalise(actual)
    step_rows = rows.differences(whole, _whole(stepwise, since, migrations))
    yield Check(
        "stepwise",
        same_steps and not step_rows,
        "\n".join(step_rows) if same_steps else state_diff(actual, _export(stepwise)),
    )
    yield _fence(fixture, scratch.create(template_name), migrations)
    yield _contention(fixture, scratch.create(template_name), migrations)
    if fixture.name == golden.NEGATIVE_BASE:
        yield _refusals(fixture, scratch, template_name, migrations)


def _contention(fixture: Fixture, db: str, migrations: SetFacts) -> Check:
    """While another session holds a lock the next revision needs, upgrade gives up with
    LockTimeout within its ladder and changes nothing (`upgrade.contention`)."""
    outcome = contention.probe(db, migrations, fixture.revision)
    if outcome is None:
        return Check("contention", True, f"no revision after {fixture.revision} takes a lock")
    problems = outcome.problems()
    return Check("contention", not problems, "\n".join(problems) or outcome.summary())


def _refusals(
    fixture: Fixture, scratch: ScratchDatabases, template: str, migrations: SetFacts
) -> Check:
    """Each negative case (the fixture broken one defect at a time) is refused by `upgrade`
    and by the online path's expand, with a typed error naming the finding, and the database
    is left as it was (`upgrade.refusals`)."""
    cases = golden.negative_cases(fixture.folder.parent)
    if not cases:
        return Check("refusals", True, "no negative cases")
    previous = migrations.previous(migrations.head.id)
    online_path = bool(online_files(migrations.head.id, Path(migrations.root))) and (
        previous == fixture.revision
    )
    found: list[str] = []
    for case in cases:
        db = scratch.create(template)
        found += refusals.run_case(db, case, migrations, online_path)
    paths = "upgrade and upgrade --online" if online_path else "upgrade"
    detail = "\n".join(found) or f"{len(cases)} broken databases refused by {paths}, unchanged"
    return Check("refusals", not found, detail)


def _rows_check(expected: rows.Doc | None, actual: rows.Doc) -> Check:
    """Every column of every row equals the golden run's (`upgrade.rows`): timestamps the
    fixture fixed stay fixed, none becomes the upgrade's "now"."""
    if expected is None:
        hint = f"no {golden.EXPECTED_ROWS}: python -m queueguard.upgrade.fixturegen --write"
        return Check("rows", False, hint)
    found = rows.differences(expected, actual)
    total = sum(len(r) for r in actual.values())
    return Check("rows", not found, "\n".join(found) or f"{total} rows, every column")


def _invariants(db: str, migrations: SetFacts) -> Check:
    """The upgraded database passes the checks that apply to the head revision (the state the
    head guarantees: e.g. keys equal to their components, every task with its directive,
    counters at or above the highest ids): a migration that breaks one fails here even where
    the golden state cannot show it."""
    head = migrations.head
    queries = audit.for_revision(head.id)
    blocking = []
    with connection(db) as conn, conn.cursor() as cursor:
        audit.set_local(cursor, target=head.id, protocol=head.protocol)
        for query in queries:
            blocking += [str(f) for f in audit.run(cursor, query) if f.blocking]
        conn.rollback()
    detail = "\n".join(blocking) if blocking else f"{len(queries)} head checks clean"
    return Check("invariants", not blocking, detail)


def _frozen(frozen: dict[str, Any] | None, upgraded: catalog.Catalog) -> Check:
    """The upgraded schema equals the frozen head catalog (fixtures/head_catalog.json)."""
    if frozen is None:
        hint = "no frozen head catalog: python -m queueguard.upgrade.fixturegen --write"
        return Check("frozen", False, hint)
    actual = catalog.document(upgraded)
    same = actual == frozen
    detail = "" if same else json_diff(frozen, actual, labels=("frozen", "upgraded"))
    return Check("frozen", same, detail)


def _online(*args: Any) -> Check:
    """`_online_path`; a refusal or failure of the path fails the check (naming it)."""
    try:
        return _online_path(*args)
    except QueueguardError as exc:
        return Check("online", False, f"{type(exc).__name__}: {exc}")


def _online_path(
    fixture: Fixture,
    scratch: ScratchDatabases,
    template: str,
    offline_db: str,
    fresh_catalog: Any,
    migrations: SetFacts,
    fail_fast: bool = False,
) -> Check:
    """The online path (expand, migrate in batches of two rows, contract) reaches the offline
    end state on the fixture plus the edge cases no fixture holds (`online.edges`; beside the
    documented range difference: exactly one more fence on each legacy @auto queue that held
    rows), the same ledger, the fresh catalog and the head's invariants,
    while a v0.4 and a v0.3 host hold a queue each (`online.probe.Fleet`); on a second copy,
    the window, the lease and abort behave (`online.probe.probe`)."""
    head = migrations.head
    previous = migrations.previous(head.id)
    if not online_files(head.id, Path(migrations.root)):
        return Check("online", True, f"revision {head.id} has no online path")
    if previous is None or not migrations.at_or_after(previous, fixture.revision):
        return Check("online", True, f"fixture at {fixture.revision}: not before {previous}")
    db = scratch.create(template)
    if fixture.revision != previous:
        upgrade(db, to=previous, progress=False, migrations=migrations)
    with connection(db) as conn:  # what no fixture holds, compared alike (online.edges)
        edges.seed(conn)
        conn.commit()
        work = edges.Work.read(conn)
    offline_edges = scratch.create(dbname_of(db))
    since = _clock(offline_edges)
    upgrade(offline_edges, progress=False, migrations=migrations)
    offline = _export(offline_edges)
    offline_rows = _whole(offline_edges, since, migrations)
    probed = scratch.create(dbname_of(db))
    knobs = online.Knobs(batch_size=2, max_lag_s=None)
    since = _clock(db)
    expanded = online.run(db, phase="expand", knobs=knobs, migrations=migrations, watch=True)
    fleet = Fleet(db)
    report = online.run(db, knobs=knobs, migrations=migrations, tell=fleet.tell, watch=True)
    problems = fleet.problems() + work.problems([expanded, report], knobs.batch_size)
    mine = _export(db)
    mine["queues"] = [q for q in mine["queues"] if not q["physicalQueue"].startswith(FLEET)]
    problems += equivalence.quiescent_differences(offline, mine, sources=set(work.sources))
    problems += [f"rows: {d}" for d in _online_rows(offline_rows, _whole(db, since, migrations))]
    if _rows(db, _LEDGER) != _rows(offline_db, _LEDGER):
        problems.append("the ledger differs from the offline upgrade's")
    problems += catalog.diff(fresh_catalog, _catalog(db))
    invariants = _invariants(db, migrations)
    if not invariants.ok:
        problems.append(invariants.detail)
    if not (fail_fast and problems):
        problems += [f"probe: {p}" for p in probe(probed, migrations, _export)]
    detail = (
        "\n".join(problems[:30])
        if problems
        else f"{report.batches} batches, {report.rows_relocated} rows relocated, "
        f"{report.directives} directives"
    )
    return Check("online", not problems and report.phase == "done", detail)


_LEDGER = status.Q["ledger"]
FLEET = f"{NAMESPACE}/"


def _online_rows(offline: rows.Doc, online_rows: rows.Doc) -> list[str]:
    """Every column of every row, online against offline on the same input: beside the
    documented range difference (compared by `equivalence`) and the probe fleet's queues."""

    def keep(_table: str, row: dict[str, Any]) -> bool:
        return not str(row.get("physical_queue", "")).startswith(FLEET)

    without = {"task_queues": {"range_id"}}
    return rows.differences(
        rows.project(offline, without=without),
        rows.project(online_rows, without=without, keep=keep),
    )


def _rows(dsn: str, sql: str) -> list[tuple[Any, ...]]:
    with connection(dsn) as conn:
        return conn.execute(sql).fetchall()


def _fence(fixture: Fixture, db: str, migrations: SetFacts) -> Check:
    """Legacy workers around a forced upgrade of `db` all fail, and change nothing."""
    probe = legacy.probe_fence(
        db,
        fixture.revision,
        lambda dsn: upgrade(dsn, force=True, progress=False, migrations=migrations),
        _checksums,
    )
    return Check("fence", probe.ok, probe.detail)


def preflight_check(migrations: SetFacts) -> Callable[[str], tuple[bool, str]]:
    """verify's preflight step: no blocking finding before the upgrade."""
    return lambda dsn: _preflight(dsn, migrations)


def _preflight(dsn: str, migrations: SetFacts) -> tuple[bool, str]:
    report = run_preflight(dsn, migrations=migrations)
    blocking = [f for f in report.findings if f.severity == "blocking"]
    warnings = [f.code for f in report.findings if f.severity == "warning"]
    if blocking:
        return False, "; ".join(str(f) for f in blocking)
    return (
        True,
        f"no blocking findings ({len(warnings)} warnings: {', '.join(sorted(set(warnings)))})",
    )


def verify(
    admin_dsn: str,
    names: list[str] | None = None,
    preflight: Callable[[str], tuple[bool, str]] | Literal["default"] | None = "default",
    progress: Callable[[str], None] | None = None,
    migrations: SetFacts | None = None,
    fixtures_root: Path | None = None,
) -> VerifyReport:
    """Run upgrade CI against the named fixtures (all by default) on the server at admin_dsn.

    `migrations` is the migration set to verify (default: the packaged one) and
    `fixtures_root` the golden fixtures to verify it against (default: the packaged ones).
    `progress` receives one line as each fixture finishes (the CLI prints them on stderr).
    """
    started = time.monotonic()
    migrations = migrations or revisions.packaged()
    check_preflight = preflight_check(migrations) if preflight == "default" else preflight
    fixtures = [get(n, fixtures_root) for n in names] if names else all_fixtures(fixtures_root)
    tell = progress or (lambda _line: None)
    with ScratchDatabases(admin_dsn) as scratch:
        fresh = scratch.create()
        upgrade(fresh, progress=False, migrations=migrations)
        fresh_catalog = _catalog(fresh)
        frozen = golden.head_catalog(fixtures_root)
        results = []
        for n, fixture in enumerate(fixtures, start=1):
            result = verify_fixture(
                fixture, scratch, fresh_catalog, check_preflight, migrations, frozen
            )
            results.append(result)
            tell(
                f"[{n}/{len(fixtures)}] {fixture.name}: {'ok' if result.ok else 'FAILED'} "
                f"({result.elapsed_ms} ms)"
            )
        tell("compatibility matrix: migrating a scratch database through every revision")
        matrix = compat.matrix_on_server(admin_dsn, scratch, migrations)
    return VerifyReport(results, int((time.monotonic() - started) * 1000), matrix)


def render(report: VerifyReport, color: bool = False) -> str:
    names: list[str] = []  # every check any fixture ran, in order (refusals: v0.3 only)
    for r in report.results:
        names += [c.name for c in r.checks if c.name not in names]
    header = f"{'fixture':8} {'rev':4} " + " ".join(f"{n:10}" for n in names) + "   ms"
    lines = [header, "-" * len(header)]
    for r in report.results:
        ran = {c.name: c.ok for c in r.checks}
        cells = " ".join(
            f"{'-':10}"
            if n not in ran
            else paint(f"{'ok':10}", "green", color)
            if ran[n]
            else paint(f"{'FAIL':10}", "red", color)
            for n in names
        )
        lines.append(f"{r.fixture:8} {r.revision:4} {cells} {r.elapsed_ms:5}")
    for r in report.results:
        for c in r.checks:
            if not c.ok:
                lines.append(f"\n{r.fixture} {c.name} failed:\n{c.detail}")
    fences = [
        f"  {r.fixture}: {c.detail}"
        for r in report.results
        for c in r.checks
        if c.name == "fence" and c.ok
    ]
    if fences:
        lines.append(
            "\nprotocol fence (legacy workers around a forced upgrade):\n" + "\n".join(fences)
        )
    if report.compatibility is not None:
        lines.append("\n" + report.compatibility.render())
    verdict = (
        paint("all fixtures upgrade to the golden state", "green", color)
        if report.ok
        else paint("VERIFY FAILED", "red", color)
    )
    lines.append(f"\n{verdict} ({report.elapsed_ms} ms)")
    return "\n".join(lines)
