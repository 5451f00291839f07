"""`queueguard preflight`: the read-only, bounded-lock audit an operator runs before upgrading.

Everything happens in ONE transaction, so it also works through a transaction-pooling proxy
(no session state is left behind or relied on):

    BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY
    SET LOCAL lock_timeout / statement_timeout / idle_in_transaction_session_timeout
    SET LOCAL queueguard.samples / queueguard.target / queueguard.protocol
    -- which revision is this? (catalog lookup, then queueguard_version if it exists)
    -- every audit_queries/ file that applies to that revision, each in a SAVEPOINT
    ROLLBACK

The checks themselves are the shipped `audit_queries/*.sql` files (the migration guard runs the
blocking ones under its own locks: one definition). Nothing is created or altered, not even a
version table; the strongest lock taken is ACCESS SHARE (reading a table). A lock or statement
timeout does not hang or crash the audit: it becomes a blocking `locks.*` finding and the
remaining checks still run, each bounded by the same timeouts.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any

import psycopg
from psycopg import sql
from psycopg.rows import TupleRow

from queueguard import revisions
from queueguard.engine import locks, topology
from queueguard.errors import ConnectionFailed, UsageError
from queueguard.pg.connect import connect
from queueguard.pg.dsn import redact
from queueguard.pg.sqlfiles import queries
from queueguard.queue_schema import audit
from queueguard.queue_schema.audit import Finding
from queueguard.queue_schema.preflight_guard import MAX_SAMPLES, Limits, check, guarded
from queueguard.revisions import VERSION_TABLE, SetFacts
from queueguard.stores import schema
from queueguard.style import SEVERITY, paint

APPLICATION_NAME = "queueguard-preflight"
FAIL_ON = ("blocking", "warning")
BEGIN = "BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY"
_RANK = {"blocking": 0, "warning": 1, "info": 2}
#: Kinds of check that rely on the schema contract (skipped when it does not hold).
_NEEDS_CONTRACT = ("data", "estimate")

Q = queries("queueguard.queue_schema", "preflight.sql")
Cursor = psycopg.Cursor[TupleRow]


@dataclass
class PreflightReport:
    """What preflight found; `ok` means no blocking finding."""

    revision: str | None
    target: str
    findings: list[Finding] = field(default_factory=list)
    elapsed_ms: int = 0

    @property
    def ok(self) -> bool:
        return not any(f.blocking for f in self.findings)

    def codes(self, severity: str | None = None) -> list[str]:
        return [f.code for f in self.findings if severity in (None, f.severity)]

    def failed(self, fail_on: str = "blocking") -> bool:
        """True when a finding at or above `fail_on` (blocking or warning) exists."""
        if fail_on not in FAIL_ON:
            raise UsageError(f"--fail-on takes {' or '.join(FAIL_ON)}, got {fail_on!r}")
        worst = FAIL_ON[: FAIL_ON.index(fail_on) + 1]
        return any(f.severity in worst for f in self.findings)

    def exit_code(self, fail_on: str = "blocking") -> int:
        return 1 if self.failed(fail_on) else 0

    def as_json(self) -> dict[str, Any]:
        return {
            "schemaVersion": 1,
            "ok": self.ok,
            "revision": self.revision,
            "target": self.target,
            "findings": [f.as_json() for f in self.findings],
            "elapsed_ms": self.elapsed_ms,
        }


def preflight(
    dsn: str,
    target: str = "head",
    lock_timeout_ms: int = 5000,
    statement_timeout_ms: int = 60000,
    samples: int = 10,
    migrations: SetFacts | None = None,
    pooled: bool = False,
) -> PreflightReport:
    """Audit the database at `dsn` for an upgrade to `target`; see the module docstring.

    Raises UsageError for bad arguments and ConnectionFailed when the server cannot be
    reached (or goes away); everything the database itself answers becomes a finding.
    """
    migrations = migrations or revisions.packaged()
    goal = migrations.resolve(target)
    limits = Limits(lock_timeout_ms, statement_timeout_ms, samples).validate()
    started = time.monotonic()
    conn = connect(dsn, application_name=APPLICATION_NAME, autocommit=True)
    try:
        revision, findings = _audit(conn, migrations, goal, limits)
        findings += _through_pooler(conn, pooled)
    except psycopg.OperationalError as exc:  # only a lost connection gets this far
        raise ConnectionFailed(
            f"lost the connection to {redact(dsn)} during preflight: {redact(str(exc)).strip()}"
        ) from None
    finally:
        conn.close()
    elapsed_ms = int((time.monotonic() - started) * 1000)
    return PreflightReport(revision, goal, sort_findings(findings), elapsed_ms)


def sort_findings(findings: list[Finding]) -> list[Finding]:
    """Blocking first, then warnings, then info; schema first within each, then by code."""
    return sorted(findings, key=_finding_order)


def _finding_order(f: Finding) -> tuple[int, int, str, str]:
    kind = f.code.split(".", 1)[0]
    kinds = audit.KIND_ORDER
    rank = kinds.index(kind) if kind in kinds else len(kinds)
    return (_RANK.get(f.severity, 3), rank, f.code, f.object or "")


# the transaction -----------------------------------------------------------------------------
def _audit(
    conn: psycopg.Connection[TupleRow], migrations: SetFacts, target: str, limits: Limits
) -> tuple[str | None, list[Finding]]:
    with conn.cursor() as cur:
        cur.execute(BEGIN)
        try:
            _set_local(cur, target, limits, migrations.get(target).protocol)
            return _run(cur, migrations, target, limits)
        finally:
            if not conn.broken:
                cur.execute("ROLLBACK")  # nothing to keep: never COMMIT


def _set_local(cur: Cursor, target: str, limits: Limits, protocol: int | None = None) -> None:
    """Transaction-scoped settings only (SET LOCAL): nothing outlives the transaction."""
    idle_ms = limits.lock_timeout_ms + limits.statement_timeout_ms
    settings = (
        ("lock_timeout", f"{limits.lock_timeout_ms}ms"),
        ("statement_timeout", f"{limits.statement_timeout_ms}ms"),
        # If this client stalls between statements, the server ends the session (and its
        # ACCESS SHARE locks) instead of holding them for ever.
        ("idle_in_transaction_session_timeout", f"{idle_ms}ms"),
        # One backend, no parallel workers: the audit uses at most one CPU of the server.
        ("max_parallel_workers_per_gather", "0"),
    )
    for name, value in settings:
        cur.execute(sql.SQL("SET LOCAL {} = {}").format(sql.SQL(name), sql.Literal(value)))
    cur.execute(Q["work_mem_floor"])
    audit.set_local(cur, target=target, protocol=protocol, samples=limits.samples)


def _run(
    cur: Cursor, migrations: SetFacts, target: str, limits: Limits
) -> tuple[str | None, list[Finding]]:
    # The catalog first (no table lock), then the version table under the same bounds.
    tables, failure = guarded(cur, "pg_catalog", limits, lambda: schema.read_tables(cur))
    if failure is not None or tables is None:
        return None, [failure] if failure is not None else []
    versions: tuple[str, ...] | None = None
    if VERSION_TABLE in tables:
        versions, failure = guarded(cur, VERSION_TABLE, limits, lambda: schema.read_versions(cur))
        if failure is not None:
            return None, [failure]
    state = schema.SchemaState(tables, versions)
    revision, findings, pending = classify(state, target, migrations)
    findings += _on_standby(cur, limits)
    if revisions.ROLLOUT_TABLE in tables:
        findings += _rollout(cur, limits)
    if revision is None or not pending:
        return revision, findings
    # the locks the pending revisions will take: what the lock checks and estimates report
    budget = locks.combined(migrations.get(r).locks for r in pending)
    audit.set_local(
        cur,
        target=target,
        protocol=migrations.get(target).protocol,
        samples=limits.samples,
        lock_budget=budget,
    )
    contract_holds = True
    skipped: list[str] = []
    for query in audit.for_revision(revision, include_advisory=True):
        if not contract_holds and query.kind in _NEEDS_CONTRACT:
            skipped.append(query.name)
            continue
        found = check(cur, query, limits)
        findings += found
        if query.kind == "schema" and any(f.blocking for f in found):
            contract_holds = False
    if skipped:
        findings.append(
            Finding(
                "preflight.checks_skipped",
                "info",
                None,
                len(skipped),
                skipped,
                "these checks read the tables the schema contract describes; they run once "
                "the blocking schema.* findings are fixed",
            )
        )
    return revision, findings


def classify(
    state: schema.SchemaState, target: str, migrations: SetFacts
) -> tuple[str | None, list[Finding], list[str]]:
    """(revision, schema findings, pending revisions) of a database's schema state.

    Pending is empty when there is nothing to check: an empty database, an unknown or
    unversioned one (blocking), or a database already at (or past) the target.
    """
    table = VERSION_TABLE
    if state.versions is None or state.empty:
        if state.unversioned:
            ours = sorted(state.tables & revisions.OUR_TABLES)
            return None, [_schema("schema.unversioned", "blocking", table, ours)], []
        return None, [_schema("schema.empty", "info", None, [])], []
    revision = state.revision
    if revision is None or not migrations.knows(revision):
        found = list(state.versions[:MAX_SAMPLES])
        return None, [_schema("schema.revision_unknown", "blocking", table, found)], []
    if revision == migrations.head.id:
        return revision, [_schema("schema.at_head", "info", table, [revision])], []
    if migrations.at_or_after(revision, target):
        return revision, [_schema("schema.at_target", "info", table, [revision, target])], []
    pending = [r.id for r in migrations.pending(revision, target)]
    return revision, [_schema("schema.pending", "info", table, pending)], pending


def _through_pooler(conn: psycopg.Connection[TupleRow], declared: bool) -> list[Finding]:
    """runtime.pooled: the older-host check is blind to idle clients behind a pooler."""
    with conn.cursor() as cur:
        why = topology.pooler(conn, cur, declared)
    if why is None:
        return []
    message = f"{audit.MESSAGES['runtime.pooled']}: {topology.POOLER_BLIND}"
    return [Finding("runtime.pooled", "warning", None, 1, [why], message)]


def _on_standby(cur: Cursor, limits: Limits) -> list[Finding]:
    """runtime.standby with the replay lag, when the audit runs on a hot standby."""
    found, failure = guarded(cur, "pg_catalog", limits, lambda: topology.standby(cur))
    if failure is not None:
        return [failure]
    if found is None:
        return []
    sample = {
        "primary": found.primary or None,
        "replayLagSeconds": found.replay_lag_s,
        "replayLagBytes": found.replay_lag_bytes,
    }
    message = audit.MESSAGES["runtime.standby"]
    return [Finding("runtime.standby", "warning", None, 1, [sample], message)]


def _rollout(cur: Cursor, limits: Limits) -> list[Finding]:
    """rollout.in_progress: an online upgrade holds the database in its protocol window."""
    from queueguard.queue_schema.guards import rollout

    found, failure = guarded(cur, revisions.ROLLOUT_TABLE, limits, lambda: rollout(cur))
    if failure is not None:
        return [failure]
    if found is None:
        return []
    sample = {"target": found[0], "phase": found[1]}
    message = audit.MESSAGES["rollout.in_progress"]
    return [
        Finding("rollout.in_progress", "warning", revisions.ROLLOUT_TABLE, 1, [sample], message)
    ]


def _schema(code: str, severity: str, obj: str | None, samples: list[Any]) -> Finding:
    return Finding(code, severity, obj, len(samples), samples, audit.MESSAGES.get(code, ""))


# rendering -----------------------------------------------------------------------------------
def summary(report: PreflightReport, fail_on: str = "blocking") -> str:
    counts = {s: len(report.codes(s)) for s in audit.SEVERITIES}
    verdict = "FAIL" if report.failed(fail_on) else "OK"
    return (
        f"{verdict}: {counts['blocking']} blocking, {counts['warning']} warning, "
        f"{counts['info']} info (fail on {fail_on})"
    )


def render_text(
    report: PreflightReport, fail_on: str = "blocking", width: int = 160, color: bool = False
) -> str:
    """A human report: one block per finding with its message and bounded samples."""
    at = report.revision or "unknown"
    lines = [f"preflight: revision {at}, target {report.target}, {report.elapsed_ms} ms"]
    for f in report.findings:
        where = f" on {f.object}" if f.object else ""
        label = paint(f"{f.severity.upper():8}", SEVERITY.get(f.severity, "bold"), color)
        lines.append(f"{label} {f.code}{where}: {f.count}")
        if f.message:
            lines.append(f"         {f.message}")
        for sample in f.samples:
            text = json.dumps(sample, ensure_ascii=False, default=str, sort_keys=True)
            lines.append(f"         - {_cut(text, width)}")
    lines.append(summary(report, fail_on))
    return "\n".join(lines)


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"
