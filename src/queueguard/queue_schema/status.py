"""`queueguard status` and `queueguard inspect`: read-only views of a database."""

from __future__ import annotations

from typing import Any

from queueguard import revisions
from queueguard.pg.connect import connection
from queueguard.pg.sqlfiles import queries
from queueguard.queue_schema import manifest
from queueguard.report.units import duration_s
from queueguard.revisions import SetFacts
from queueguard.stores import schema

Q = queries("queueguard.queue_schema", "inspect.sql")


def status(dsn: str, migrations: SetFacts | None = None) -> dict[str, Any]:
    """Revision, protocol, queue and row counts, and drift of applied revision hashes
    against the migration set (default: the packaged one)."""
    migrations = migrations or revisions.packaged()
    with connection(dsn, application_name="queueguard-status") as conn:
        conn.read_only = True
        state = schema.inspect(conn)
        result: dict[str, Any] = {
            "schemaVersion": 1,
            "revision": state.revision,
            "head": migrations.head.id,
            "empty": state.empty,
            "protocol": None,
            "queues": None,
            "tasks": None,
            "drift": [],
        }
        if "runtime_protocol" in state.tables:
            rows = conn.execute(
                "SELECT min_protocol, max_protocol FROM runtime_protocol"
            ).fetchall()
            result["protocol"] = {"min": rows[0][0], "max": rows[0][1]} if len(rows) == 1 else None
        if "task_queues" in state.tables:
            queues, _, auto = conn.execute(Q["queue_summary"]).fetchone() or (0, 0, 0)
            result["queues"] = queues
            result["legacy_auto_queues"] = auto
        if "tasks" in state.tables:
            row = conn.execute(Q["task_count"]).fetchone()
            result["tasks"] = row[0] if row else 0
        if revisions.ROLLOUT_TABLE in state.tables:
            result["rollout"] = rollout_status(conn, migrations)
        if "queueguard_migrations" in state.tables:
            on_disk = {r.revision: r.sha256 for r in manifest.compute(migrations.root)}
            for revision, sha in conn.execute(Q["ledger"]):
                if on_disk.get(revision) != sha:
                    result["drift"].append(revision)
    return result


def render_text(doc: dict[str, Any]) -> str:
    """`status` for a terminal: one `key value` line each, in words where a value is missing
    (an empty database, no protocol row, no drift)."""
    window = doc["protocol"]
    protocol = (
        f"[{window['min']}, {window['max']}]"
        if window
        else "none (no single runtime_protocol row)"
        if doc["revision"]
        else "none"
    )
    drift = doc["drift"]
    lines = [
        f"revision  {doc['revision'] or ('none (an empty database)' if doc['empty'] else 'none')}",
        f"head      {doc['head']}",
        f"protocol  {protocol}",
        f"queues    {_count(doc['queues'])}"
        + (f" ({doc['legacy_auto_queues']} legacy @auto)" if doc.get("legacy_auto_queues") else ""),
        f"tasks     {_count(doc['tasks'])}",
        "drift     "
        + (f"revisions {', '.join(drift)} differ from the migration set" if drift else "no drift"),
    ]
    rollout = doc.get("rollout")
    if rollout:
        left = rollout["rowsLeft"]
        eta = f", ETA {duration_s(rollout['etaSeconds'])}" if rollout["etaSeconds"] else ""
        lines.append(
            f"rollout   to {rollout['target']}, phase {rollout['phase']}: "
            f"{rollout['rowsDone']} rows migrated, {left['directives']} without directive "
            f"and {left['relocations']} in @auto left{eta}"
        )
    return "\n".join(lines)


def _count(n: int | None) -> str:
    return "none (no such table)" if n is None else str(n)


def rollout_status(conn: Any, migrations: SetFacts) -> dict[str, Any] | None:
    """The online rollout in progress: phase, progress (rows migrated, rows left) and an
    ETA from the migrate rate so far; None when there is none."""
    from queueguard.queue_schema.online.session import statements

    target = migrations.head.id
    sql = statements(migrations, target)
    row = conn.execute(sql["rollout"]["read"], {"target": target}).fetchone()
    if row is None:
        return None
    phase, started, updated, holder, lease_until, done, seconds, leased = row
    directives, relocations = conn.execute(sql["migrate"]["remaining"]).fetchone()
    rate = done / seconds if seconds else None
    left = directives + relocations
    return {
        "target": target,
        "phase": phase,
        "startedAt": started.isoformat(),
        "updatedAt": updated.isoformat(),
        "migrator": holder if leased else None,
        "leaseUntil": lease_until.isoformat() if leased else None,
        "rowsDone": done,
        "rowsLeft": {"directives": directives, "relocations": relocations},
        "rowsPerSecond": round(rate, 1) if rate else None,
        "etaSeconds": round(left / rate, 1) if rate and phase == "migrate" else None,
    }


def inspect_workflow(dsn: str, workflow_id: str, namespace: str | None) -> dict[str, Any]:
    """Both Matching tables' rows for one workflow."""
    with connection(dsn, application_name="queueguard-inspect") as conn:
        conn.read_only = True
        params = {"workflow_id": workflow_id, "namespace": namespace}
        tasks = [
            dict(
                zip(
                    ("physical_queue", "task_id", "run_id", "kind", "version_directive"),
                    r,
                    strict=True,
                )
            )
            for r in conn.execute(Q["workflow_tasks"], params)
        ]
        keys = sorted({t["physical_queue"] for t in tasks})
        queues = [
            dict(
                zip(
                    ("physical_queue", "range_id", "ack_level", "last_task_id", "stored_task_rows"),
                    r,
                    strict=True,
                )
            )
            for r in conn.execute(Q["workflow_queues"], {"queues": keys})
        ]
    return {"schemaVersion": 1, "workflowId": workflow_id, "task_queues": queues, "tasks": tasks}
