"""Targets: snapshot validation (pure) and the snapshot importer on PostgreSQL.

`snapshot.parse` either returns a document that imports into the memory store and
re-exports to itself, or raises SnapshotError. Every document the validator accepts loads
into an empty head database (the CLI's `snapshot import` path) and exports back equal; the
load runs in a transaction that is rolled back, so a failure leaves nothing behind (checked).
"""

from __future__ import annotations

import json
from datetime import datetime
from decimal import Decimal
from typing import Any

from queueguard import snapshot
from queueguard.core.store import Execution
from queueguard.errors import QueueguardError, SnapshotError
from queueguard.pg.connect import connect
from queueguard.queue_schema import state


def check_snapshot(raw: str | bytes) -> str:
    try:
        doc = snapshot.parse(raw)
    except SnapshotError:
        return "rejected"
    assert doc["formatVersion"] == snapshot.CURRENT_FORMAT
    exported = snapshot.export_memory(snapshot.import_memory(doc))
    again = snapshot.parse(json.dumps(exported, ensure_ascii=True))
    assert snapshot.normalise(again) == snapshot.normalise(exported)
    assert comparable(exported) == comparable(doc)
    return "accepted"


def same_json(a: Any, b: Any) -> bool:
    """Equal as JSON: numbers compared as decimals (jsonb keeps 6.049558985430014e+16 as the
    number 60495589854300140, which Python then reads back as an int)."""

    def canon(x: Any) -> Any:
        return json.loads(json.dumps(x), parse_float=Decimal, parse_int=Decimal)

    return bool(canon(a) == canon(b))


def comparable(doc: dict[str, Any]) -> dict[str, Any]:
    """The fields a store keeps of a document (unknown extra keys are ignored on import, a
    missing deploymentVersion is null), timestamps as instants."""

    def instant(value: str | None) -> float | None:
        return None if value is None else datetime.fromisoformat(value).timestamp()

    return {
        "queues": sorted(
            (
                q["physicalQueue"],
                q["rangeId"],
                q["ackLevel"],
                q["lastTaskId"],
                sorted(((t["taskId"], t["data"]) for t in q["tasks"]), key=lambda t: t[0]),
            )
            for q in doc["queues"]
        ),
        "userData": sorted(
            ((u["namespace"], u["taskQueue"], u["version"], u["data"]) for u in doc["userData"]),
            key=lambda u: (u[0], u[1]),
        ),
        "executions": sorted(
            Execution.from_record(e).as_row() for e in doc["history"]["executions"]
        ),
        "scheduledTasks": sorted(
            (s["runId"], s["scheduledEventId"], s["kind"], instant(s.get("startedAt")))
            for s in doc["history"]["scheduledTasks"]
        ),
        "protocol": (doc["protocol"]["min"], doc["protocol"]["max"]),
    }


class Importer:
    """One empty head database; each example loads a document in a transaction, compares the
    export and rolls back (as `snapshot import` does, minus the commit)."""

    def __init__(self, dsn: str) -> None:
        self.conn = connect(dsn, application_name="qg-chaos-fuzz")

    def check(self, raw: str | bytes) -> str:
        try:
            doc = snapshot.parse(raw)
        except SnapshotError:
            return "rejected"
        try:
            with self.conn.transaction(force_rollback=True):
                state.load_document(self.conn, doc)
                exported = state.export_database(self.conn)
        except QueueguardError:
            assert state.is_empty(self.conn)
            return "rejected-by-database"
        assert state.is_empty(self.conn)  # rolled back: nothing left behind
        assert same_json(comparable(exported), comparable(doc))
        return "accepted"

    def close(self) -> None:
        self.conn.close()
