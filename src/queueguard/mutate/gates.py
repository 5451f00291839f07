"""The gates that judge a copy of the migration set: lint, verify, and a user command.

A gate that fails (or raises: `queueguard verify` would exit non-zero too) kills the mutant.

The verify gate runs `queueguard verify`'s own checks (`verify.verify_fixture` per golden
fixture, the compatibility matrix from `compat.build_matrix`) with what one run shares
(`shared`): the fresh install clones a template at the mutated revision's predecessor, and
the matrix reuses the schemas of the earlier revisions. It stops at the first fixture that
fails (a killed mutant needs no second witness) and checks the fixture closest to the mutated
revision first (fewest revisions to apply). Preflight is not run per mutant: it reads the
audit queries and the revisions' facts, never their SQL, so no mutant can change its result;
the baseline runs the complete `verify.verify()`, preflight included.
"""

from __future__ import annotations

import os
import subprocess
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from queueguard.engine import catalog
from queueguard.lint import lint
from queueguard.mutate.shared import Shared
from queueguard.pg.scratch import ScratchDatabases
from queueguard.queue_schema import golden, verify
from queueguard.queue_schema.compat import build_matrix, schema_view
from queueguard.queue_schema.golden import Fixture, all_fixtures
from queueguard.queue_schema.runner import upgrade
from queueguard.queue_schema.verify import report as verify_report
from queueguard.resources import MIGRATIONS_ENV, audit_dir
from queueguard.revisions import SetFacts

_OUTPUT_LIMIT = 20_000
Release = Callable[[ScratchDatabases], None]


@dataclass(frozen=True)
class GateResult:
    name: str
    ok: bool
    #: one line: why it failed (or what passed)
    summary: str
    #: what the gate printed (bounded)
    output: str
    elapsed_ms: int

    def as_json(self) -> dict[str, Any]:
        return {
            "gate": self.name,
            "ok": self.ok,
            "summary": self.summary,
            "output": self.output,
            "elapsedMs": self.elapsed_ms,
        }


def _bounded(text: str) -> str:
    if len(text) <= _OUTPUT_LIMIT:
        return text
    return text[: _OUTPUT_LIMIT // 2] + "\n… (cut) …\n" + text[-_OUTPUT_LIMIT // 2 :]


def _ms(started: float) -> int:
    return int((time.monotonic() - started) * 1000)


def _raised(name: str, exc: BaseException, started: float) -> GateResult:
    first = (str(exc).strip().splitlines() or [""])[0]
    text = "".join(traceback.format_exception(exc))
    summary = f"raised {type(exc).__name__}: {first}"
    return GateResult(name, False, summary, _bounded(text), _ms(started))


# lint -------------------------------------------------------------------------------------
def lint_gate(root: Path) -> GateResult:
    """`queueguard lint` on the copy and the audit queries."""
    started = time.monotonic()
    try:
        report = lint([root, Path(str(audit_dir()))])
    except Exception as exc:
        return _raised("lint", exc, started)
    summary = report.summary()
    if not report.ok:
        codes = sorted({f.code for f in report.findings})
        summary = f"{len(report.findings)} finding(s): {', '.join(codes)}"
    text = "\n".join(filter(None, [report.render_text(), report.summary()]))
    return GateResult("lint", report.ok, summary, _bounded(text), _ms(started))


# verify -----------------------------------------------------------------------------------
def _closest_first(fixtures: list[Fixture]) -> list[Fixture]:
    return sorted(fixtures, key=lambda f: (f.revision, f.name), reverse=True)


def _verdict(report: verify_report.VerifyReport) -> str:
    # Each failing check with the first line of its evidence: the summary is all a killed
    # mutant's report keeps (`reason`), and "killed by verify" alone cannot be judged.
    failed = [
        f"{r.fixture} {c.name}" + (f" ({_first_line(c.detail)})" if c.detail.strip() else "")
        for r in report.results
        for c in r.checks
        if not c.ok
    ]
    if report.compatibility is not None:
        failed += [f"compatibility: {v}" for v in report.compatibility.violations()]
    if not failed:
        names = ", ".join(r.fixture for r in report.results)
        matrix = "; compatibility matrix safe" if report.compatibility is not None else ""
        return f"passed ({names}{matrix})"
    return "failed: " + "; ".join(failed)


def _first_line(text: str, limit: int = 200) -> str:
    line = (text.strip().splitlines() or [""])[0]
    return line if len(line) <= limit else line[: limit - 1] + "…"


def fast_verify(
    shared: Shared,
    migrations: SetFacts,
    fixtures_root: Path | None,
    prefix: str,
    release: Release = ScratchDatabases.drop_all,
    *,
    online_only: bool = False,
) -> verify_report.VerifyReport:
    """verify's checks on `migrations` with the run's shared databases; stops at the first
    failing fixture (see the module docstring). `release(scratch)` drops the scratch
    databases afterwards (a worker hands them to a background thread: a DROP DATABASE waits
    for a checkpoint, and the next mutant need not). `online_only`: only the online path
    changed, so only its check can change (the offline checks and the matrix read none of
    its files: their verdict is the baseline's)."""
    started = time.monotonic()
    fixtures = _closest_first(all_fixtures(fixtures_root))
    ids = migrations.ids
    scratch = ScratchDatabases(shared.admin_dsn, prefix=prefix)
    try:
        fresh = scratch.create(shared.template)
        upgrade(fresh, progress=False, migrations=migrations)
        fresh_catalog = catalog.introspect(fresh)
        views = list(shared.views)
        for revision in [] if online_only else ids[ids.index(shared.revision) :]:
            if revision == migrations.head.id:
                views.append(schema_view(fresh))
                continue
            db = scratch.create(shared.template)
            upgrade(db, to=revision, progress=False, migrations=migrations)
            views.append(schema_view(db))
            scratch.drop(db)
        results = []
        frozen = golden.head_catalog(fixtures_root)
        for fixture in fixtures:
            result = verify.verify_fixture(
                fixture,
                scratch,
                fresh_catalog,
                None,
                migrations,
                frozen,
                online_only=online_only,
                fail_fast=True,
            )
            results.append(result)
            if not result.ok:
                break
        ok = all(r.ok for r in results)
        matrix = build_matrix(views, migrations=migrations) if ok and not online_only else None
    finally:
        release(scratch)
    return verify_report.VerifyReport(results, _ms(started), matrix)


def verify_gate(
    shared: Shared,
    migrations: SetFacts,
    fixtures_root: Path | None,
    prefix: str,
    release: Release = ScratchDatabases.drop_all,
    *,
    online_only: bool = False,
) -> GateResult:
    started = time.monotonic()
    try:
        report = fast_verify(
            shared, migrations, fixtures_root, prefix, release, online_only=online_only
        )
    except Exception as exc:
        return _raised("verify", exc, started)
    output = _bounded(verify_report.render(report))
    return GateResult("verify", report.ok, _verdict(report), output, _ms(started))


def exact_verify_gate(
    admin_dsn: str, migrations: SetFacts, fixtures_root: Path | None
) -> GateResult:
    """The complete `queueguard verify` (preflight and matrix included): the baseline's."""
    started = time.monotonic()
    try:
        report = verify.verify(admin_dsn, migrations=migrations, fixtures_root=fixtures_root)
    except Exception as exc:
        return _raised("verify", exc, started)
    output = _bounded(verify_report.render(report))
    return GateResult("verify", report.ok, _verdict(report), output, _ms(started))


# the user's command -------------------------------------------------------------------------
def command_gate(command: str, root: Path) -> GateResult:
    """`command` in a shell, with QUEUEGUARD_MIGRATIONS=<the copy>; non-zero exit fails."""
    started = time.monotonic()
    env = {**os.environ, MIGRATIONS_ENV: str(root)}
    run = subprocess.run(command, shell=True, env=env, capture_output=True, text=True, check=False)
    output = _bounded((run.stdout or "") + (run.stderr or ""))
    tail = (output.strip().splitlines() or [""])[-1]
    ok = run.returncode == 0
    summary = f"exit {run.returncode}" + (f": {tail}" if tail else "")
    return GateResult("command", ok, summary, output, _ms(started))
