"""Hand-built databases for the preflight tests (v0.1 and v0.3 shapes, see migrations/sql/).

The v0.3 rows exercise an acknowledgement gap, a legacy `@auto` backlog whose default queue
holds rows, a pinned queue, a hostile name and a user-data row, and are clean: preflight
reports no blocking finding and no warning on them.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from queueguard.engine.checksums import table_checksums
from queueguard.pg import scratch
from queueguard.pg.connect import connection
from queueguard.queue_schema import audit
from queueguard.queue_schema.preflight import PreflightReport
from queueguard.queue_schema.runner import upgrade

RUN_PINNED = "00000000-0000-4000-8000-000000000001"
RUN_AUTO = "00000000-0000-4000-8000-000000000002"
RUN_PLAIN = "00000000-0000-4000-8000-000000000003"
DEFAULT_QUEUE = "ns/orders/workflow/0"
AUTO_QUEUE = "ns/orders/workflow/0@auto"
PINNED_QUEUE = "ns/orders/activity/1@deploy.b1"
HOSTILE_QUEUE = "ns/a%2Fb%40c%25%20%C3%A9/workflow/0"


def payload(run_id: str, kind: str = "workflow", event: int = 1) -> str:
    task = (
        f'"namespace": "ns", "workflowId": "wf", "runId": "{run_id}", "kind": "{kind}", '
        f'"scheduledEventId": {event}, "attempt": 1'
    )
    return f'{{"task": {{{task}}}, "enqueuedAt": "2024-01-01T00:00:00Z"}}'


V03_ROWS = f"""
INSERT INTO executions (run_id, namespace, workflow_id, status, versioning_behavior,
                        deployment_version) VALUES
    ('{RUN_PINNED}', 'ns', 'wf-pinned', 'running', 'pinned', 'deploy.b1'),
    ('{RUN_AUTO}', 'ns', 'wf-auto', 'running', 'auto_upgrade', NULL),
    ('{RUN_PLAIN}', 'ns', 'wf-plain', 'running', 'unversioned', NULL);
INSERT INTO scheduled_tasks (run_id, scheduled_event_id, kind) VALUES
    ('{RUN_PINNED}', 1, 'activity'), ('{RUN_AUTO}', 1, 'workflow'), ('{RUN_PLAIN}', 1, 'workflow');
INSERT INTO task_queue_user_data (namespace, task_queue, version, data)
VALUES ('ns', 'orders', 1, '{{"rules": []}}');
INSERT INTO task_queues (physical_queue, namespace, task_queue, task_type, partition, version,
                         range_id, ack_level, last_task_id) VALUES
    ('{DEFAULT_QUEUE}', 'ns', 'orders', 'workflow', 0, '', 2, 1, 3),
    ('{AUTO_QUEUE}', 'ns', 'orders', 'workflow', 0, 'auto', 1, 0, 2),
    ('{PINNED_QUEUE}', 'ns', 'orders', 'activity', 1, 'deploy.b1', 1, 0, 1),
    ('{HOSTILE_QUEUE}', 'ns', 'a/b@c% é', 'workflow', 0, '', 1, 0, 1);
INSERT INTO tasks (physical_queue, task_id, data) VALUES
    ('{DEFAULT_QUEUE}', 2, '{payload(RUN_PLAIN)}'),
    ('{DEFAULT_QUEUE}', 3, '{payload(RUN_PLAIN, event=2)}'),
    ('{AUTO_QUEUE}', 1, '{payload(RUN_AUTO)}'),
    ('{AUTO_QUEUE}', 2, '{payload(RUN_AUTO, event=2)}'),
    ('{PINNED_QUEUE}', 1, '{payload(RUN_PINNED, "activity")}'),
    ('{HOSTILE_QUEUE}', 1, '{payload(RUN_PLAIN, event=3)}');
"""

V01_ROWS = f"""
INSERT INTO executions (run_id, namespace, workflow_id, status, versioning_behavior,
                        deployment_version) VALUES
    ('{RUN_AUTO}', 'ns', 'wf-auto', 'running', 'auto_upgrade', NULL);
INSERT INTO tasks (namespace, task_queue, task_type, partition, version, data) VALUES
    ('ns', 'orders', 'workflow', 0, '', '{payload(RUN_AUTO)}'),
    ('ns', 'orders', 'workflow', 0, 'auto', '{payload(RUN_AUTO, event=2)}');
"""


def execute(dsn: str, statements: str, *params: Any) -> None:
    """Run SQL as the owner and commit (test setup, never under preflight)."""
    with connection(dsn) as conn:
        conn.execute(statements, params or None)
        conn.commit()


def scalar(dsn: str, query: str) -> Any:
    with connection(dsn) as conn:
        row = conn.execute(query).fetchone()
        return row[0] if row else None


def checksums(dsn: str) -> dict[str, str]:
    """Per-table content checksums plus the catalog's relation list (nothing created)."""
    with connection(dsn) as conn:
        result = table_checksums(conn)
        relations = conn.execute(
            "SELECT string_agg(relname || ':' || relkind::text, ',' ORDER BY relname) "
            "FROM pg_class WHERE relnamespace = 'public'::regnamespace"
        ).fetchone()
    result["<catalog>"] = str(relations[0] if relations else "")
    return result


def template(admin: str, revision: str, rows: str) -> Iterator[str]:
    """A scratch database at `revision` holding `rows`, for CREATE DATABASE … TEMPLATE."""
    dsn = scratch.create_database(admin, prefix="qgtpl")
    upgrade(dsn, to=revision, progress=False)
    execute(dsn, rows)
    name = scratch.dbname_of(dsn)
    yield name
    scratch.drop_database(admin, name)


def by_code(report: PreflightReport) -> dict[str, audit.Finding]:
    return {f.code: f for f in report.findings}


def blocking(report: PreflightReport) -> set[str]:
    return set(report.codes("blocking"))
