"""The only writer of the golden fixtures: `python -m queueguard.upgrade.fixturegen --write`.

For each released version it builds the database as users have it — the released revision's
schema from the migration set, plus data that exercises every case the upgrade must handle —
dumps it with pg_dump (normalised so it loads on any supported major), records a manifest
with the schema fingerprint, upgrades a clone to head and freezes the normalised state as the
golden expectation. It also writes the memory snapshots (legacy and v3). Regenerating is a
deliberate act: without `--write` it regenerates into a temporary folder and prints a diff.
"""

from __future__ import annotations

import argparse
import difflib
import json
import sys
import tempfile
import uuid
from pathlib import Path
from typing import Any

from queueguard import revisions, snapshot
from queueguard.core.keys import legacy_queue
from queueguard.pg import scratch, tools
from queueguard.pg.connect import connection
from queueguard.resources import fixtures_dir
from queueguard.revisions import MigrationSet
from queueguard.snapshot import relocation
from queueguard.upgrade import catalog, golden, state
from queueguard.upgrade.dumps import normalise_dump
from queueguard.upgrade.runner import upgrade

NS = uuid.UUID("6f1c9d2e-0000-4000-8000-000000000000")
EPOCH = "2026-01-01 00:00:00+00"

# Hostile names: every character class the key encoding must keep injective.
HOSTILE_NS = "team/α @ 100% 'quoted'"
HOSTILE_TQ = "it's/q@x%y ünïcødé 🚀"


def run_id(name: str) -> str:
    return str(uuid.uuid5(NS, name))


# History shared by every fixture: (name, namespace, workflow, status, behavior, version)
EXECUTIONS = [
    ("auto-1", "default", "order-1", "running", "auto_upgrade", "deploy.v2"),
    ("auto-2", "default", "order-2", "running", "auto_upgrade", "deploy.v2"),
    ("auto-3", "default", "pay-1", "running", "auto_upgrade", None),
    ("pinned-1", "default", "order-3", "running", "pinned", "deploy.build-7"),
    ("plain-1", "default", "order-4", "running", "unversioned", None),
    ("plain-2", "default", "ship-1", "running", "unversioned", None),
    ("done-1", "default", "order-5", "completed", "auto_upgrade", "deploy.v1"),
    ("hostile-1", HOSTILE_NS, "wf ✓ 'x'/y", "running", "auto_upgrade", "deploy.v2"),
    ("hostile-2", HOSTILE_NS, "wf-2", "running", "pinned", "deploy.büild-9"),
]
UNKNOWN_RUN = run_id("never-recorded")  # a uuid History has never seen
NOT_A_UUID = "run-not-a-uuid"

# v0.1/v0.2 spool rows in delivery order: (namespace, task_queue, type, partition, version, run)
SPOOL = [
    ("default", "orders", "workflow", 0, "", "plain-1"),
    ("default", "orders", "workflow", 0, "auto", "auto-1"),  # auto; default queue has rows
    ("default", "orders", "activity", 0, "", "plain-1"),  # same family, activity type
    ("default", "orders", "workflow", 1, "", "plain-2"),  # several partitions
    ("default", "payments", "workflow", 0, "auto", "auto-3"),  # auto; default queue empty
    ("default", "orders", "workflow", 0, "deploy.build-7", "pinned-1"),  # pinned: stays
    ("default", "orders", "workflow", 0, "auto", "auto-2"),
    ("default", "orders", "workflow", 2, "", "plain-2"),
    ("default", "orders", "workflow", 0, "", "unknown"),  # run unknown to History
    ("default", "payments", "workflow", 0, "auto", "done-1"),  # completed run
    (HOSTILE_NS, HOSTILE_TQ, "workflow", 3, "", "hostile-2"),
    (HOSTILE_NS, HOSTILE_TQ, "workflow", 3, "auto", "hostile-1"),
    (HOSTILE_NS, HOSTILE_TQ, "activity", 3, "deploy.büild-9", "hostile-2"),
    ("default", "orders", "activity", 0, "auto", "not-a-uuid"),  # runId not a uuid
    ("default", "orders", "workflow", 0, "", "plain-1"),
]

USER_DATA = [
    ("default", "orders", 3, {"versioning": {"current": "deploy.v2", "ramping": None}}),
    ("default", "payments", 1, {"versioning": {"current": "deploy.v2"}}),
    (HOSTILE_NS, HOSTILE_TQ, 2, {"note": "it's 100% ünïcødé"}),
]


def _run_of(name: str) -> str:
    if name == "unknown":
        return UNKNOWN_RUN
    if name == "not-a-uuid":
        return NOT_A_UUID
    return run_id(name)


def _payload(ns: str, run: str, kind: str, event: int) -> dict[str, Any]:
    workflow = next((e[2] for e in EXECUTIONS if run_id(e[0]) == run), f"wf-{run[:8]}")
    return {
        "task": {
            "namespace": ns,
            "workflowId": workflow,
            "runId": run,
            "kind": kind,
            "scheduledEventId": event,
            "attempt": 1,
        },
        "enqueuedAt": f"2026-01-01T00:00:{event:02d}Z",
    }


def _lit(value: Any) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, dict):
        value = json.dumps(value, ensure_ascii=False, sort_keys=True)
    return "'" + str(value).replace("'", "''") + "'"


def _history_sql(scheduled: list[tuple[str, int, str, bool]]) -> list[str]:
    stmts = [
        "INSERT INTO executions (run_id, namespace, workflow_id, status, versioning_behavior, "
        f"deployment_version, created_at) VALUES ({_lit(run_id(n))}, {_lit(ns)}, {_lit(wf)}, "
        f"{_lit(st)}, {_lit(b)}, {_lit(v)}, {_lit(EPOCH)});"
        for n, ns, wf, st, b, v in EXECUTIONS
    ]
    known = {run_id(e[0]) for e in EXECUTIONS}
    for run, event, kind, started in scheduled:
        if run in known:
            stmts.append(
                "INSERT INTO scheduled_tasks (run_id, scheduled_event_id, kind, started_at) "
                f"VALUES ({_lit(run)}, {event}, {_lit(kind)}, "
                f"{_lit(EPOCH) if started else 'NULL'});"
            )
    return stmts


def _spool_rows() -> list[tuple[str, str, str, int, str, dict[str, Any], str]]:
    rows = []
    for i, (ns, tq, ttype, part, version, run_name) in enumerate(SPOOL, start=1):
        payload = _payload(ns, _run_of(run_name), ttype, i)
        rows.append((ns, tq, ttype, part, version, payload, f"2026-01-01 00:01:{i:02d}+00"))
    return rows


def data_v01() -> list[str]:
    rows = _spool_rows()
    stmts = _history_sql(
        [
            (p["task"]["runId"], p["task"]["scheduledEventId"], t, False)
            for _, _, t, _, _, p, _ in rows
        ]
    )
    for ns, tq, ttype, part, version, payload, created in rows:
        stmts.append(
            "INSERT INTO tasks (namespace, task_queue, task_type, partition, version, data, "
            f"created_at) VALUES ({_lit(ns)}, {_lit(tq)}, {_lit(ttype)}, {part}, "
            f"{_lit(version)}, {_lit(payload)}::jsonb, {_lit(created)});"
        )
    return stmts


def data_v02() -> list[str]:
    stmts = data_v01()
    for ns, tq, ud_version, data in USER_DATA:
        stmts.append(
            "INSERT INTO task_queue_user_data (namespace, task_queue, version, data, updated_at) "
            f"VALUES ({_lit(ns)}, {_lit(tq)}, {ud_version}, {_lit(data)}::jsonb, {_lit(EPOCH)});"
        )
    return stmts


# v0.3 queues: (namespace, family, type, partition, version, range, ack, last, [(id, run)])
# fmt: off
V03_QUEUES: list[tuple[str, str, str, int, str, int, int, int, list[tuple[int, str]]]] = [
    # ack gap: 4 not handled, 5 dispatched above the gap, rows 4-6 retained; default queue
    # that also receives a relocated backlog (collision case: stale last 5 < highest row 6)
    ("default", "orders", "workflow", 0, "", 7, 3, 5,
     [(4, "plain-1"), (5, "unknown"), (6, "plain-1")]),
    ("default", "orders", "workflow", 0, "auto", 7, 2, 4, [(3, "auto-1"), (4, "auto-2")]),
    # activity queue of the same family, separate range
    ("default", "orders", "activity", 0, "", 2, 0, 2, [(1, "plain-1"), (2, "not-a-uuid")]),
    # several partitions; partition 2 is sync-matched only (ack = last = 0, no rows)
    ("default", "orders", "workflow", 1, "", 3, 10, 12, [(11, "plain-2"), (12, "plain-2")]),
    ("default", "orders", "workflow", 2, "", 4, 0, 0, []),
    # auto backlog whose default queue is empty and has no metadata row yet
    ("default", "payments", "workflow", 0, "auto", 1, 0, 2, [(1, "auto-3"), (2, "done-1")]),
    # auto backlog with a stale last_task_id (rows above it); default queue drained (last 10)
    ("default", "shipping", "workflow", 0, "auto", 2, 1, 2,
     [(2, "auto-1"), (3, "auto-2"), (5, "auto-3")]),
    ("default", "shipping", "workflow", 0, "", 5, 10, 10, []),
    # pinned queue: not relocated
    ("default", "orders", "workflow", 0, "deploy.build-7", 1, 0, 2,
     [(1, "pinned-1"), (2, "pinned-1")]),
    # an already drained legacy auto queue: only fenced
    ("default", "billing", "workflow", 0, "auto", 3, 8, 8, []),
    # sync-matched queue that delivered work without ever storing a row
    ("default", "billing", "activity", 0, "", 9, 0, 0, []),
    # hostile names, default + auto + pinned
    (HOSTILE_NS, HOSTILE_TQ, "workflow", 3, "", 1, 0, 1, [(1, "hostile-2")]),
    (HOSTILE_NS, HOSTILE_TQ, "workflow", 3, "auto", 1, 0, 2, [(1, "hostile-1"), (2, "unknown")]),
    (HOSTILE_NS, HOSTILE_TQ, "activity", 3, "deploy.büild-9", 1, 0, 1, [(1, "hostile-2")]),
    # a kept queue whose rows belong to runs with three different directives (each row must
    # get its own run's, not a neighbour's)
    ("default", "invoices", "workflow", 0, "", 2, 0, 3,
     [(1, "plain-1"), (2, "pinned-1"), (3, "auto-1")]),
    # a stale counter on a queue that receives no relocation (only the repair step fixes it)
    ("default", "refunds", "workflow", 0, "", 1, 0, 2,
     [(1, "plain-2"), (2, "plain-2"), (3, "plain-2"), (4, "plain-2")]),
    # top rows already purged: last_task_id above the highest stored id must stay (no reuse)
    ("default", "refunds", "activity", 0, "", 1, 0, 10, [(1, "plain-1"), (2, "plain-1")]),
]
# fmt: on


def data_v03() -> list[str]:
    scheduled: list[tuple[str, int, str, bool]] = []
    stmts: list[str] = []
    event = 100
    for ns, tq, ttype, part, version, rng, ack, last, rows in V03_QUEUES:
        key = legacy_queue(ns, tq, ttype, part, version)
        stmts.append(
            "INSERT INTO task_queues (physical_queue, namespace, task_queue, task_type, "
            f"partition, version, range_id, ack_level, last_task_id) VALUES ({_lit(key)}, "
            f"{_lit(ns)}, {_lit(tq)}, {_lit(ttype)}, {part}, {_lit(version)}, {rng}, {ack}, "
            f"{last});"
        )
        for task_id, run_name in rows:
            event += 1
            run = _run_of(run_name)
            scheduled.append((run, event, ttype, task_id % 2 == 1 and task_id > ack))
            stmts.append(
                "INSERT INTO tasks (physical_queue, task_id, data, created_at) VALUES "
                f"({_lit(key)}, {task_id}, {_lit(_payload(ns, run, ttype, event))}::jsonb, "
                f"'2026-01-01 00:02:00+00'::timestamptz + interval '{event} seconds');"
            )
    stmts = _history_sql(scheduled) + stmts
    for ns, tq, ud_version, data in USER_DATA:
        stmts.append(
            "INSERT INTO task_queue_user_data (namespace, task_queue, version, data, updated_at) "
            f"VALUES ({_lit(ns)}, {_lit(tq)}, {ud_version}, {_lit(data)}::jsonb, {_lit(EPOCH)});"
        )
    return stmts


FIXTURES: dict[str, dict[str, Any]] = {
    "v0.1": {
        "revision": "001",
        "data": data_v01,
        "exercises": [
            "spool rows in interleaved delivery order across queues",
            "workflow and activity queues of one family",
            "several partitions",
            "legacy auto backlog whose default queue has rows",
            "legacy auto backlog whose default queue is empty",
            "pinned queues (not relocated)",
            "runs unknown to History and a non-uuid runId",
            "a completed run",
            "hostile names (/ @ % ' spaces unicode)",
        ],
    },
    "v0.2": {
        "revision": "002",
        "data": data_v02,
        "exercises": ["everything v0.1 holds", "user data rows, hostile family names"],
    },
    "v0.3": {
        "revision": "003",
        "data": data_v03,
        "exercises": [
            "acknowledgement gaps (dispatched rows retained above a gap)",
            "sync-matched queues with ack_level = last_task_id = 0",
            "several partitions",
            "workflow and activity queue of one family",
            "auto backlog whose default queue has no metadata row",
            "auto backlog whose default queue has rows and a stale last_task_id (collision)",
            "auto backlog with a stale last_task_id and a drained default queue (last 10)",
            "an already drained legacy auto queue",
            "pinned queues (not relocated)",
            "a kept queue holding rows of runs with different directives",
            "a stale last_task_id on a queue that receives no relocation",
            "last_task_id above the highest stored id (purged rows; ids never reused)",
            "runs unknown to History and a non-uuid runId",
            "user data rows",
            "hostile names (/ @ % ' spaces unicode)",
        ],
    },
}


# building and dumping --------------------------------------------------------------------
def pg_dump(dsn: str) -> str:
    flags = ["--no-owner", "--no-privileges", "--inserts", "--quote-all-identifiers"]
    dumped = tools.run("pg_dump", dsn, flags)
    if dumped.returncode != 0:
        raise SystemExit(f"pg_dump failed: {dumped.stderr.decode(errors='replace')[-500:]}")
    return normalise_dump(dumped.stdout.decode())


def build(name: str, admin: str, out_dir: Path, migrations: MigrationSet | None = None) -> None:
    spec = FIXTURES[name]
    folder = out_dir / name
    folder.mkdir(parents=True, exist_ok=True)
    with scratch.ScratchDatabases(admin, prefix="qg_gen") as databases:
        dsn = databases.create()
        upgrade(dsn, to=spec["revision"], progress=False, migrations=migrations)
        with connection(dsn) as conn:
            schema_fp = catalog.fingerprint(conn)
            for stmt in spec["data"]():
                conn.execute(stmt)  # no parameters: psycopg leaves `%` alone
            conn.commit()
        (folder / "database.sql").write_text(pg_dump(dsn))
        before = None
        if spec["revision"] == "003":
            with connection(dsn) as conn:
                before = state.export_database(conn, format_version=3)
            (out_dir / "snapshots").mkdir(exist_ok=True)
            _write_json(out_dir / "snapshots" / "v3_golden.json", before)
        upgrade(dsn, progress=False, migrations=migrations)
        with connection(dsn) as conn:
            after = state.export_database(conn)
        if before is not None and relocation.apply_004(before) != after:
            raise SystemExit("memory and SQL upgrades disagree on v0.3; fix before freezing")
        _write_json(folder / "expected_head.json", after)
        _write_json(
            folder / "manifest.json",
            {
                "name": name,
                "revision": spec["revision"],
                "schema_sha256": schema_fp,
                "generator": "python -m queueguard.upgrade.fixturegen --write",
                "exercises": spec["exercises"],
            },
        )


def legacy_snapshots(out_dir: Path) -> None:
    """Pre-003 exports (deliveryId based), as v0.1/v0.2 tooling wrote them."""
    folder = out_dir / "snapshots"
    folder.mkdir(exist_ok=True)
    tasks = [
        {
            "deliveryId": i,
            "namespace": ns,
            "taskQueue": tq,
            "taskType": t,
            "partition": p,
            "version": v,
            "data": payload,
        }
        for i, (ns, tq, t, p, v, payload, _) in enumerate(_spool_rows(), start=1)
    ]
    _write_json(folder / "legacy_v1.json", {"tasks": tasks})
    _write_json(
        folder / "legacy_v2.json",
        {
            "formatVersion": 2,
            "tasks": tasks,
            "userData": [
                {"namespace": ns, "taskQueue": tq, "version": v, "data": d}
                for ns, tq, v, d in USER_DATA
            ],
        },
    )
    v3 = json.loads((folder / "v3_golden.json").read_text())
    v3["queues"][-1]["tasks"].append({"taskId": 99, "deliveryId": 99, "data": {"task": {}}})
    _write_json(folder / "legacy_record_in_v3.json", v3)
    snapshot.upgrade_document(json.loads((folder / "v3_golden.json").read_text()))


def _write_json(path: Path, doc: Any) -> None:
    path.write_text(json.dumps(doc, indent=2, ensure_ascii=False, sort_keys=True) + "\n")


def head_catalog(admin: str, out_dir: Path, migrations: MigrationSet | None = None) -> None:
    """Freeze the head schema's catalog (verify compares every upgrade with it)."""
    with scratch.ScratchDatabases(admin, prefix="qg_gen") as databases:
        dsn = databases.create()
        upgrade(dsn, progress=False, migrations=migrations)
        _write_json(out_dir / golden.HEAD_CATALOG, catalog.document(catalog.introspect(dsn)))


def generate(out_dir: Path, migrations: MigrationSet | None = None) -> None:
    admin = scratch.server_dsn("embedded")
    for name in FIXTURES:
        build(name, admin, out_dir, migrations)
    head_catalog(admin, out_dir, migrations)
    legacy_snapshots(out_dir)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--write", action="store_true", help="overwrite the frozen fixtures")
    parser.add_argument("--fixtures", type=Path, default=fixtures_dir())
    parser.add_argument(
        "--migrations", type=Path, help="the migration set (default: the packaged one)"
    )
    args = parser.parse_args(argv)
    migrations = revisions.load(args.migrations) if args.migrations else None
    if args.write:
        generate(args.fixtures, migrations)
        print(f"fixtures written to {args.fixtures}")
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        generate(Path(tmp), migrations)
        changed = 0
        for new in sorted(Path(tmp).rglob("*")):
            if new.is_dir():
                continue
            rel = new.relative_to(tmp)
            old = args.fixtures / rel
            old_text = old.read_text().splitlines() if old.exists() else []
            diff = list(
                difflib.unified_diff(
                    old_text,
                    new.read_text().splitlines(),
                    f"frozen/{rel}",
                    f"regenerated/{rel}",
                    lineterm="",
                )
            )
            changed += bool(diff)
            sys.stdout.write("\n".join(diff[:200]) + ("\n" if diff else ""))
        print(f"{changed} file(s) differ from the frozen fixtures")
        return 1 if changed else 0


if __name__ == "__main__":
    raise SystemExit(main())
