"""The audit queries: one definition of every data check, shared by preflight and the guard.

Each file in `audit_queries/` is plain read-only SQL a DBA can paste into psql. A header line
`-- applies-to: 003` names the revisions it checks. The migration guard runs the same files
under the migration's own locks, so preflight and the migration cannot drift apart.

A file whose header says `-- guard: no` is advisory (runtime, locks and estimate checks: it
can only warn or inform); preflight runs it, the guard does not. Checks run schema first,
then data, then the advisory kinds (see `KIND_ORDER`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import psycopg

from queueguard.resources import audit_dir

_APPLIES = re.compile(r"^-- applies-to:\s*(.+)$", re.MULTILINE)
_CHECK = re.compile(r"^-- check:\s*([a-z]+)\.", re.MULTILINE)
_ADVISORY = re.compile(r"^-- guard:\s*no\b", re.MULTILINE)
SEVERITIES = ("blocking", "warning", "info")
#: The order checks run in: the schema contract first (data checks rely on it).
KIND_ORDER = ("schema", "locks", "runtime", "data", "estimate")


@dataclass(frozen=True)
class Finding:
    """One check result: a stable dotted code, a severity and bounded samples."""

    code: str
    severity: str
    object: str | None
    count: int
    samples: list[Any] = field(default_factory=list)
    message: str = ""

    @property
    def blocking(self) -> bool:
        return self.severity == "blocking"

    def as_json(self) -> dict[str, Any]:
        return {
            "code": self.code,
            "severity": self.severity,
            "object": self.object,
            "count": self.count,
            "samples": list(self.samples),
            "message": self.message,
        }

    def __str__(self) -> str:
        shown = ", ".join(str(s) for s in self.samples[:5])
        return f"{self.severity} {self.code} on {self.object}: {self.count} ({shown})"


@dataclass(frozen=True)
class AuditQuery:
    name: str
    sql: str
    applies_to: tuple[str, ...]
    header: str

    @property
    def kind(self) -> str:
        """`schema`, `data`, `locks`, `runtime` or `estimate`: the first code's prefix."""
        match = _CHECK.search(self.sql)
        return match.group(1) if match else "data"

    @property
    def advisory(self) -> bool:
        """Advisory files (`-- guard: no`) only warn or inform; the guard skips them."""
        return _ADVISORY.search(self.sql) is not None

    @property
    def order(self) -> tuple[int, str]:
        rank = KIND_ORDER.index(self.kind) if self.kind in KIND_ORDER else len(KIND_ORDER)
        return (rank, self.name)


def audit_queries() -> list[AuditQuery]:
    """Every shipped audit file, in name order."""
    result = []
    for entry in sorted(audit_dir().iterdir(), key=lambda e: e.name):
        if not entry.name.endswith(".sql"):
            continue
        sql = entry.read_text(encoding="utf-8")
        match = _APPLIES.search(sql)
        applies = tuple(match.group(1).split()) if match else ()
        header = "\n".join(line[3:] for line in sql.splitlines() if line.startswith("-- "))
        result.append(AuditQuery(entry.name, sql, applies, header))
    return result


def for_revision(revision: str, *, include_advisory: bool = False) -> list[AuditQuery]:
    """The files that check a database at `revision`, schema checks first.

    Without `include_advisory` (the migration guard) only files that can block are returned.
    """
    chosen = [
        q
        for q in audit_queries()
        if revision in q.applies_to and (include_advisory or not q.advisory)
    ]
    return sorted(chosen, key=lambda q: q.order)


def set_local(
    cursor: psycopg.Cursor[Any],
    *,
    target: str,
    protocol: int | None,
    samples: int = 10,
    lock_budget: Mapping[str, str] | None = None,
) -> None:
    """The settings the audit files read, for the current transaction only (SET LOCAL):
    the revision being upgraded to, the protocol it requires, the sample bound, and the
    locks the pending revisions take (their lock budgets, strongest mode per table)."""
    for name, value in (
        ("queueguard.target", target),
        ("queueguard.protocol", str(protocol or 0)),
        ("queueguard.samples", str(samples)),
        ("queueguard.lock_budget", json.dumps(dict(lock_budget or {}), sort_keys=True)),
    ):
        cursor.execute("SELECT set_config(%s, %s, true)", (name, value))


#: The advisory check that names hosts of an older protocol (the runner refuses on it too).
OLDER_HOSTS = "001_runtime_older_hosts.sql"


def older_hosts(cursor: psycopg.Cursor[Any], *, target: str, protocol: int) -> list[str]:
    """application_names of connected hosts speaking a protocol below `protocol` (the same
    check preflight reports as runtime.older_hosts), in the caller's transaction."""
    query = next(q for q in audit_queries() if q.name == OLDER_HOSTS)
    set_local(cursor, target=target, protocol=protocol, samples=1000)
    return [s["applicationName"] for f in run(cursor, query) for s in f.samples]


def run(cursor: psycopg.Cursor[Any], query: AuditQuery) -> list[Finding]:
    """Run one audit file; each row becomes a Finding.

    The file is sent with the extended protocol (binary results), which the server accepts
    for exactly one statement: a file that smuggles a second statement (`COMMIT; …`) fails
    instead of running. No parameters are bound, so `%` in the SQL is left alone.
    """
    cursor.execute(query.sql, binary=True, prepare=False)
    findings = []
    for code, severity, obj, count, samples in cursor.fetchall():
        findings.append(
            Finding(code, severity, obj, int(count), list(samples or []), _message(code))
        )
    return findings


MESSAGES = {
    "data.legacy_components_invalid": "spool rows cannot form a valid queue key; 003 refuses",
    "data.queue_key_invalid": "queue keys are not the canonical encoding of their components",
    "data.relocation_destination_mismatch": "an @auto queue's default destination differs",
    "data.payload_shape": "payloads are not objects or lack task.runId/task.kind",
    "data.task_without_queue": "task rows whose queue has no task_queues row",
    "data.rows_at_or_below_ack": "rows at or below ack_level (already handled; 004 keeps them)",
    "data.stale_last_task_id": "rows above last_task_id (stale counter; 004 repairs it)",
    "data.directive_missing": "task rows without their version directive (004 gives every row one)",
    "data.auto_backlog": "task rows left in a legacy @auto queue (004 relocates all of them)",
    "data.counter_below_rows": "queues whose last_task_id is below their highest stored id "
    "(ids would be reused)",
    "data.ack_above_counter": "queues whose ack_level is above their last_task_id",
    "data.unknown_run": "tasks whose run is unknown to History (directive: unversioned)",
    # schema.*: which revision, and the physical contract the pending migrations rely on
    "schema.empty": "empty database: nothing to check (upgrade creates the head schema)",
    "schema.unversioned": "queueguard tables without a queueguard_version table: refusing to "
    "guess the revision",
    "schema.revision_unknown": "queueguard_version does not hold exactly one released revision "
    "(001-004)",
    "schema.at_head": "the database is at head (004): nothing to do",
    "schema.at_target": "the database is already at or past the target revision: nothing to do",
    "schema.pending": "revisions the upgrade to the target will apply",
    "schema.table_missing": "a table the pending migrations read or rewrite is missing",
    "schema.column_missing": "a column the pending migrations use is missing",
    "schema.column_type": "a column the pending migrations use has another type",
    "schema.key_missing": "a unique key the pending migration relies on is missing",
    "schema.name_taken": "a table the pending migrations create already exists",
    # runtime.*: who is connected
    "runtime.older_hosts": "hosts of an older protocol are connected: stop them before "
    "upgrading (upgrade refuses while they are, unless --force)",
    "runtime.pooled": "preflight reached the database through a pooler or proxy",
    "runtime.standby": "preflight ran on a hot standby: data checks read its (replayed) copy; "
    "locks.* and runtime.* see only its own sessions: run preflight on the primary too",
    "runtime.activity_hidden": "sessions hidden from this role (grant pg_read_all_stats to see "
    "their start times)",
    # rollout.*: an online upgrade in progress
    "rollout.in_progress": "an online upgrade (`upgrade --online`) is in progress: the protocol "
    "window is open, v0.3 and v0.4 hosts may both run; offline upgrade and rehearse refuse "
    "until it is finished or aborted",
    # locks.*: what would make the migration (or this audit) wait
    "locks.conflicting_lock": "other sessions hold or await locks that conflict with the "
    "pending revisions' lock budgets; the migration would queue behind them",
    "locks.long_transaction": "long-running transactions hold locks on tables the migration "
    "locks; it would wait for them to end",
    "locks.lock_timeout": "a check could not get ACCESS SHARE within lock_timeout",
    "locks.statement_timeout": "a check did not finish within statement_timeout",
    # estimate.*: what 004 will cost
    "estimate.rows_rewritten": "task rows 004 rewrites (each gains its version directive)",
    "estimate.rows_relocated": "task rows 004 moves out of legacy @auto queues",
    "estimate.extra_disk": "extra disk 004's new row versions take until VACUUM",
    "estimate.wal": "WAL 004 writes (size archives and replicas accordingly)",
    "estimate.lock_hold": "how long the upgrade holds its locks (samples: `locks`, the pending "
    "revisions' lock budgets)",
    "estimate.vacuum_analyze": "after 004, run VACUUM (ANALYZE) on tasks and task_queues",
}


def _message(code: str) -> str:
    return MESSAGES.get(code, "")
