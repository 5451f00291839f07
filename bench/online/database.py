"""The 003 database of the online-upgrade benchmark: `seed_v3`'s legacy rows over `families`
default queues and their `@auto` siblings, plus History for the tasks the benchmark's hosts
will add (so every added task can be started, and the count check can find it)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from bench.common.databases import query
from bench.common.v3_database import build_template
from queueguard.pg.scratch import ScratchDatabases


@dataclass(frozen=True)
class RunSet:
    """Runs `prefix<index>` with uuid `base + index + 1`: one running execution and one
    scheduled task (event 1) each, made set-based before the upgrade."""

    prefix: str
    base: int

    def run(self, index: int) -> str:
        return str(uuid.UUID(int=self.base + index + 1))

    def workflow(self, index: int) -> str:
        return f"{self.prefix}{index}"

    def index_of(self, workflow: str) -> int | None:
        return int(workflow.removeprefix(self.prefix)) if workflow.startswith(self.prefix) else None

    def add_history(self, dsn: str, count: int) -> None:
        run = f"lpad(to_hex({self.base} + i + 1), 32, '0')::uuid"
        query(
            dsn,
            f"""
            INSERT INTO executions (run_id, namespace, workflow_id, status, versioning_behavior)
            SELECT {run}, 'bulk', '{self.prefix}' || i, 'running', 'unversioned'
            FROM generate_series(0, {count - 1}) i;
            INSERT INTO scheduled_tasks (run_id, scheduled_event_id, kind)
            SELECT {run}, 1, 'workflow' FROM generate_series(0, {count - 1}) i;
            """,
        )


FLEET = RunSet("fleet-", 0)
HANDOVER = RunSet("handover-", 10**15)  # far from the fleet's (and md5's are random)
#: workflow ids of the legacy rows (`seed_v3`)
LEGACY_PATTERN = "wf-%"


def build(
    databases: ScratchDatabases, rows: int, families: int, *, fleet_runs: int, handover_runs: int
) -> str:
    """A new database at 003 (clone it with `CREATE DATABASE … TEMPLATE`); its DSN."""
    dsn = build_template(databases, rows, families)
    FLEET.add_history(dsn, fleet_runs)
    HANDOVER.add_history(dsn, handover_runs)
    query(dsn, "VACUUM ANALYZE")
    return dsn


def started(dsn: str, runs: RunSet) -> list[int]:
    """Indexes of `runs` whose task History recorded as started."""
    rows = query(
        dsn,
        "SELECT e.workflow_id FROM scheduled_tasks s JOIN executions e USING (run_id)"
        " WHERE e.workflow_id LIKE %s AND s.started_at IS NOT NULL",
        (runs.prefix + "%",),
    )
    return sorted(int(str(r[0]).removeprefix(runs.prefix)) for r in rows)


def legacy_counts(dsn: str) -> tuple[int, int, int]:
    """(legacy runs known to History, of them started, task rows left in the database)."""
    row = query(
        dsn,
        """
        SELECT (SELECT count(*) FROM executions WHERE workflow_id LIKE %(p)s),
               (SELECT count(*) FROM scheduled_tasks s JOIN executions e USING (run_id)
                WHERE e.workflow_id LIKE %(p)s AND s.started_at IS NOT NULL),
               (SELECT count(*) FROM tasks)
        """,
        {"p": LEGACY_PATTERN},
    )[0]
    return int(row[0]), int(row[1]), int(row[2])
