"""The audit queries: one definition of every data check, shared by preflight and the guard.

Each file in `audit_queries/` is plain read-only SQL a DBA can paste into psql. A header line
`-- applies-to: 003` names the revisions it checks. The migration guard runs the same files
under the migration's own locks, so preflight and the migration cannot drift apart.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import psycopg

from queueguard.resources import audit_dir

_APPLIES = re.compile(r"^-- applies-to:\s*(.+)$", re.MULTILINE)
SEVERITIES = ("blocking", "warning", "info")


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


def for_revision(revision: str) -> list[AuditQuery]:
    return [q for q in audit_queries() if revision in q.applies_to]


def run(cursor: psycopg.Cursor[Any], query: AuditQuery) -> list[Finding]:
    """Run one audit file; each row becomes a Finding."""
    cursor.execute(query.sql)  # no parameters: psycopg leaves % alone
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
    "data.unknown_run": "tasks whose run is unknown to History (directive: unversioned)",
}


def _message(code: str) -> str:
    return MESSAGES.get(code, "")
