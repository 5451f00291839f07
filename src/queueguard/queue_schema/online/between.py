"""The database between two batches of `upgrade --online`'s migrate (verify's probe).

An end-state comparison cannot see a batch that leaves the database wrong for the next one
to put right. The probe's migrate reports each committed batch (`tell`); this observer then
reads, from its own session, what v0.3 hosts would see at that moment and checks what must
hold at every batch boundary, not only at the end:

- a legacy `@auto` source's `ack_level` never passes a row still in it that it had not
  acknowledged (v0.3 readers read above it), never goes back, and covers every id a batch
  moved out, up to the counter as it stood (`ack ≥ least(highest moved id, last_task_id
  before the batch)`: ids that are gone are done); `last_task_id` never goes back and covers
  every id a batch moved out;
- no row of an `@auto` queue carries a version directive: only a move gives one (the row is
  written once, in its destination).

To give the directive batches `@auto` rows to (wrongly) mark, the observer has a v0.3 host
append rows to a fresh `@auto` queue right after the first move: the relocation pass already
listed its sources, so those rows wait in `@auto` for the next pass.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from queueguard.core.history import task_payload
from queueguard.pg.connect import connection
from queueguard.pg.sqlfiles import queries
from queueguard.queue_schema.legacy.workers import LegacyQueue, V03Worker
from queueguard.queue_schema.online.report import Progress

Q = queries("queueguard.queue_schema.online", "edges.sql")


@dataclass(frozen=True)
class Source:
    """One @auto queue at a batch boundary."""

    ack: int
    last: int
    ids: tuple[int, ...]


def source_problems(key: str, before: Source, after: Source) -> list[str]:
    """What is wrong with one source between two consecutive observations (pure)."""
    found = []
    moved = sorted(set(before.ids) - set(after.ids))
    pending = [i for i in after.ids if i > before.ack]  # not acknowledged before the batch
    if pending and after.ack >= pending[0]:
        found.append(
            f"{key}: ack_level {before.ack} -> {after.ack} covers row {pending[0]}, still in "
            "the queue and not acknowledged (a v0.3 reader would skip it)"
        )
    if after.ack < before.ack or after.last < before.last:
        found.append(
            f"{key}: counters went back between batches: ack_level {before.ack} -> "
            f"{after.ack}, last_task_id {before.last} -> {after.last}"
        )
    if moved:
        gone = min(moved[-1], before.last)
        if after.ack < gone:
            found.append(
                f"{key}: ids up to {moved[-1]} moved out, ack_level {after.ack} is below "
                f"{gone} (ids that are gone are done)"
            )
        if after.last < moved[-1]:
            found.append(f"{key}: last_task_id {after.last} below moved id {moved[-1]}")
    return found


@dataclass
class Between:
    """`tell` for the probe's migrate: checks each batch boundary (see the module)."""

    dsn: str
    namespace: str
    late: int = 3  # rows the v0.3 host appends to a fresh @auto queue after the first move
    problems: list[str] = field(default_factory=list)
    boundaries: int = 0
    spent_s: float = 0.0  # time spent observing (not migrating)
    _last: dict[str, Source] = field(default_factory=dict)
    _appended: bool = False

    def start(self) -> None:
        """Before migrate: the sources as they stand."""
        self._last = self._sources()

    def __call__(self, message: object) -> None:
        started = time.monotonic()
        try:
            self._check(message)
        finally:
            self.spent_s += time.monotonic() - started

    def _check(self, message: object) -> None:
        if not isinstance(message, Progress):
            return
        self.boundaries += 1
        now = self._sources()
        for key, source in now.items():
            before = self._last.get(key)
            if before is not None:
                self.problems += source_problems(key, before, source)
        self._last = now
        with connection(self.dsn) as conn:
            marked = conn.execute(Q["auto_rows_with_directive"]).fetchall()
        if marked:
            rows = ", ".join(f"{k} #{i}" for k, i in marked)
            self.problems.append(
                f"between batches, rows of @auto queues carry a version directive: {rows}"
            )
        if message.step == "relocate" and not self._appended:
            self._appended = True
            self._append_late()
            self._last = self._sources()

    def _sources(self) -> dict[str, Source]:
        with connection(self.dsn) as conn:
            rows: list[Any] = conn.execute(Q["sources_now"]).fetchall()
        return {str(k): Source(int(a), int(last), tuple(ids)) for k, a, last, ids in rows}

    def _append_late(self) -> None:
        queue = LegacyQueue(self.namespace, "late", version="auto")
        with V03Worker(self.dsn, host_id="verify-between") as host:
            host.start()
            host.load(queue)
            for n in range(self.late):
                data = task_payload(
                    queue.namespace, f"wf-late-{n}", f"run-late-{n}", "workflow", n + 1
                )
                host.append(queue, data)
