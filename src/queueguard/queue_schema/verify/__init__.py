"""`queueguard verify`: upgrade CI against every golden fixture.

Per fixture, each in fresh databases cloned from a template (CREATE DATABASE … TEMPLATE):
load → preflight (expect no blocking finding) → upgrade to head → compare with the golden
state and the golden rows (every column: `upgrade.rows`) → compare the catalog with a fresh
install → upgrade step by step to the same state → re-run the upgrade and prove it changed
nothing → the protocol fence: released v0.2/v0.3 workers (`upgrade.legacy`) started around the
upgrade all fail and change nothing → contention: a lock held elsewhere makes upgrade give up
within its ladder, changing nothing (`upgrade.contention`) → on v0.3, every negative case
refused unchanged (`upgrade.refusals`) → the online path (`verify_online`). Once per run,
the static compatibility matrix (`compat`) of those workers' statements × every revision.
Scratch databases are ours (prefix `qg`) and are dropped afterwards; no other database is
touched.

The offline checks live in `verify_offline`, the online one in `verify_online`, what they
read in `verify_reads`, the report and its rendering in `verify_report`.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Literal

from queueguard import revisions
from queueguard.engine import catalog
from queueguard.pg.connect import connection
from queueguard.pg.scratch import ScratchDatabases, dbname_of
from queueguard.queue_schema import compat, golden
from queueguard.queue_schema.golden import Fixture, all_fixtures, get, load
from queueguard.queue_schema.preflight import preflight as run_preflight
from queueguard.queue_schema.runner import upgrade
from queueguard.queue_schema.verify.offline import _offline_checks
from queueguard.queue_schema.verify.online import _online
from queueguard.queue_schema.verify.reads import _clock, _export, _whole
from queueguard.queue_schema.verify.report import (
    Check,
    FixtureResult,
    VerifyReport,
    json_diff,
    render,
    state_diff,
)
from queueguard.report.units import count
from queueguard.revisions import SetFacts

__all__ = [
    "Check",
    "FixtureResult",
    "VerifyReport",
    "json_diff",
    "lazy",
    "preflight_check",
    "render",
    "state_diff",
    "verify",
    "verify_fixture",
]


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


def preflight_check(migrations: SetFacts) -> Callable[[str], tuple[bool, str]]:
    """verify's preflight step: no blocking finding before the upgrade."""
    return lambda dsn: _preflight(dsn, migrations)


def _preflight(dsn: str, migrations: SetFacts) -> tuple[bool, str]:
    report = run_preflight(dsn, migrations=migrations)
    blocking = [f for f in report.findings if f.severity == "blocking"]
    warnings = [f.code for f in report.findings if f.severity == "warning"]
    if blocking:
        return False, "; ".join(str(f) for f in blocking)
    if not warnings:
        return True, "no blocking findings, no warnings"
    codes = ", ".join(sorted(set(warnings)))
    return True, f"no blocking findings ({count(len(warnings), 'warning')}: {codes})"


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
        fresh_catalog = catalog.introspect(fresh)
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
