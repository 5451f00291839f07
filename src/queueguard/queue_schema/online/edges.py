"""The input of verify's `online` check beyond the fixture, and what the path must do with it.

Edge cases of the online path that no golden fixture holds, added by verify's `online` check
to each fixture's database before it compares the online path with offline 004 on the same
input: a legacy `@auto` queue whose top rows were acked and purged (last_task_id above its
highest row), one without a default sibling, one with a stale counter, an empty one, a pinned
queue; rows at or below the ack level; runs History knows (auto-upgrade, pinned, unversioned),
runs it does not know and a runId that is not a uuid. More rows per queue than the check's
batch size, so moves and directives take several batches.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass

from psycopg import Connection
from psycopg.rows import TupleRow

from queueguard.core.history import task_payload
from queueguard.pg.sqlfiles import queries
from queueguard.queue_schema.legacy.workers import LegacyQueue
from queueguard.queue_schema.online.report import OnlineReport

Q = queries("queueguard.queue_schema.online", "edges.sql")
NAMESPACE = "queueguard-edges"
ENQUEUED = "2026-01-01T00:00:00Z"
_RUNS = uuid.UUID("5b0e6a52-31f4-4c59-9a6e-0c3f1e2d7a10")  # names the generated run ids


@dataclass(frozen=True)
class Shape:
    family: str
    version: str
    range_id: int
    ack_level: int
    last_task_id: int
    ids: tuple[int, ...]
    namespace: str = NAMESPACE


SHAPES = (
    Shape("purged-top", "", 2, 1, 3, (2, 3)),
    Shape("purged-top", "auto", 3, 4, 9, (3, 4, 5, 6, 7)),  # rows 8, 9 acked and purged
    Shape("purged-one-batch", "auto", 1, 0, 6, (2, 3)),  # drained by one batch of two
    Shape("alone", "auto", 1, 0, 5, (1, 2, 3, 4, 5)),  # no default queue: 004 creates it
    Shape("stale", "", 1, 0, 2, (1, 2, 3)),  # counter below its highest row
    Shape("stale", "auto", 2, 2, 4, (1, 2, 3, 4, 5, 6)),
    Shape("drained", "auto", 4, 3, 3, ()),
    Shape("pinned", "dep.1", 1, 1, 4, (2, 3, 4)),
    # more rows than a few batches, under a hostile name whose key sorts before most others
    Shape("long", "", 1, 0, 20, tuple(range(1, 21)), "100% ünïcødé"),
)
#: History's answer for the n-th row of a queue, in turn
RUN_KINDS = ("auto_upgrade", "unknown", "pinned", "not-a-uuid", "unversioned")


def seed(conn: Connection[TupleRow]) -> None:
    """Add the edge cases to a database at revision 003 (the caller commits)."""
    for shape in SHAPES:
        queue = LegacyQueue(shape.namespace, shape.family, version=shape.version)
        conn.execute(
            Q["queue"],
            {
                **queue.params(),
                "range_id": shape.range_id,
                "ack_level": shape.ack_level,
                "last_task_id": shape.last_task_id,
            },
        )
        for n, task_id in enumerate(shape.ids):
            run = _run(conn, queue, task_id, RUN_KINDS[n % len(RUN_KINDS)])
            workflow = f"wf-{shape.family}-{task_id}"
            data = task_payload(
                queue.namespace, workflow, run, queue.task_type, task_id, enqueued_at=ENQUEUED
            )
            conn.execute(
                Q["task"], {"key": queue.key, "task_id": task_id, "data": json.dumps(data)}
            )


def _run(conn: Connection[TupleRow], queue: LegacyQueue, task_id: int, kind: str) -> str:
    if kind == "not-a-uuid":
        return f"run-{queue.task_queue}-{task_id}"
    run = str(uuid.uuid5(_RUNS, f"{queue.key}/{task_id}"))
    if kind != "unknown":
        conn.execute(
            Q["execution"],
            {
                "run_id": run,
                "namespace": queue.namespace,
                "workflow_id": f"wf-{queue.task_queue}-{task_id}",
                "behavior": kind,
                "deployment": "dep.1" if kind == "pinned" else None,
            },
        )
    return run


@dataclass(frozen=True)
class Work:
    """What the online path has to do on a quiescent input (read before it runs)."""

    counters: int  # stale counters to repair
    relocations: int  # rows in legacy @auto queues
    directives: int  # other rows without their directive
    sources: frozenset[str]  # the @auto queues that hold rows

    @classmethod
    def read(cls, conn: Connection[TupleRow]) -> Work:
        row = conn.execute(Q["work"]).fetchone()
        assert row is not None
        sources = frozenset(str(r[0]) for r in conn.execute(Q["auto_sources"]))
        return cls(int(row[0]), int(row[1]), int(row[2]), sources)

    def problems(self, reports: list[OnlineReport], batch_size: int) -> list[str]:
        """What the runs' reports say they did, against the input; no batch above the size."""
        found = []
        largest = max(r.largest_batch for r in reports)
        if largest > batch_size:
            found.append(
                f"a batch touched {largest} rows or queues, above --batch-size {batch_size}"
            )
        done = (
            sum(r.counters_repaired for r in reports),
            sum(r.rows_relocated for r in reports),
            sum(r.directives for r in reports),
        )
        expected = (self.counters, self.relocations, self.directives)
        if done != expected:
            found.append(
                "the report counts (counters repaired, rows relocated, directives) "
                f"{done}, the input held {expected}"
            )
        return found
