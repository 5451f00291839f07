"""A chaos host process: `python -m bench.common.host CONFIG_JSON` (spawned by `HostProcess`).

A Matching host with producers and consumers on the queues it owns, logging every confirmed
spool, every History answer and every delivery as JSON lines (`<host>.<incarnation>.log` in
the run's folder), and handling fences and lost connections the way an embedding
application must: log, unload, back off, retry. Producers stop when the folder's `drain`
flag appears; the process exits on SIGTERM.

With `start_timeout` set, History has that start timeout, consumers complete what they get
(a `slow_share` of them only after 1.5 timeouts: a worker that outlives its start), and a
start timer (`runtime.timer`) dispatches expired starts again onto this host's queues.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import random
import signal
import sys
import threading
import time
import traceback
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import psycopg

from bench.common.workload import identity
from queueguard.core.history import HistoryWrapper, task_payload
from queueguard.core.keys import PhysicalQueue, decode
from queueguard.core.store import (
    CompletionOutcome,
    Execution,
    ExpiredStart,
    History,
    Start,
)
from queueguard.errors import ConnectionFailed, NotOwner, QueueUnloaded, StaleRangeError
from queueguard.runtime.matching import Delivery, Matching
from queueguard.runtime.membership import StaticMembership
from queueguard.runtime.timer import StartTimer
from queueguard.stores.postgres import PostgresStore


@dataclass
class HostConfig:
    dsn: str
    host: str
    hosts: list[str]  # this host's view of the membership
    queues: list[str]  # keys; the host serves those it owns
    folder: str  # logs and the drain flag live here
    incarnation: int = 0
    produce_interval: float = 0.01
    poll_timeout: float = 0.05  # how long a parked poll waits for a sync match
    sync_share: float = 0.1  # share of polls that park (the rest take the backlog or return)
    producers_per_queue: int = 1
    consumers_per_queue: int = 1
    poll_batch: int = 1  # > 1: consumers use Matching.poll_batch
    pool_size: int = 4
    prepare: bool = True  # False through a transaction pooler (no server-side prepares)
    create_schema: bool = True  # False: the database must already be at head
    backoff: tuple[float, float] = (0.02, 0.5)  # first and largest pause after an error
    matching: dict[str, Any] = field(default_factory=dict)  # Matching keyword options
    #: History's start timeout (s). None: none, and consumers complete nothing (a start is
    #: final); set: consumers complete, and a start timer re-dispatches expired starts
    start_timeout: float | None = None
    timer_interval: float = 0.25  # how often the start timer looks for expired starts
    slow_share: float = 0.0  # share of deliveries completed only after 1.5 start timeouts

    @property
    def app_host_id(self) -> str:
        """The store's host id (application_name): one per incarnation, for the audit."""
        return f"{self.host}.{self.incarnation}"

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self))

    @classmethod
    def from_json(cls, text: str) -> HostConfig:
        raw = json.loads(text)
        raw["backoff"] = tuple(raw["backoff"])
        return cls(**raw)


class _Log:
    """JSON lines appended with one write(2) each: whole lines survive a SIGKILL."""

    def __init__(self, path: Path) -> None:
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    def __call__(self, **event: Any) -> None:
        event["t"] = round(time.time(), 4)
        os.write(self._fd, (json.dumps(event, separators=(",", ":")) + "\n").encode())


class LedgerHistory(HistoryWrapper):
    """A History that logs every answer it gives (which identity, which outcome)."""

    def __init__(self, inner: History, log: _Log) -> None:
        super().__init__(inner)
        self._log = log

    def start_tasks(self, identities: Sequence[tuple[str, int]]) -> list[Start]:
        starts = self.inner.start_tasks(identities)
        for (run_id, event), start in zip(identities, starts, strict=True):
            at = start.started_at.isoformat() if start.started_at else None
            self._log(e="start", run=run_id, ev=event, o=start.outcome.value, at=at)
        return starts

    def record_task_completed(
        self, run_id: str, scheduled_event_id: int, started_at: datetime | None
    ) -> CompletionOutcome:
        outcome = self.inner.record_task_completed(run_id, scheduled_event_id, started_at)
        at = started_at.isoformat() if started_at else None
        self._log(e="complete", run=run_id, ev=scheduled_event_id, o=outcome.value, at=at)
        return outcome


def serve(cfg: HostConfig) -> None:
    """Run one host incarnation until SIGTERM (or the drain flag, for its producers)."""
    folder = Path(cfg.folder)
    log = _Log(folder / f"{cfg.host}.{cfg.incarnation}.log")
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    drain_flag = folder / "drain"
    log(e="boot", host=cfg.host, inc=cfg.incarnation)
    store = PostgresStore(
        cfg.dsn,
        host_id=cfg.app_host_id,
        pool_size=cfg.pool_size,
        prepare=cfg.prepare,
        create_schema=cfg.create_schema,
        start_timeout=cfg.start_timeout,
    )
    history = LedgerHistory(store.history, log)

    def on_fenced(queue: PhysicalQueue, exc: StaleRangeError) -> None:
        # every fence, also the ones Matching does not raise (a checkpoint after an ack)
        log(e="fenced", q=queue.key, role="fence", err=type(exc).__name__, msg=str(exc)[:160])

    matching = Matching(
        store,
        cfg.host,
        StaticMembership(tuple(cfg.hosts)),
        history=history,
        on_fenced=on_fenced,
        **cfg.matching,
    )
    fenced = (QueueUnloaded, NotOwner)  # StaleRangeError is logged by on_fenced
    lost = (psycopg.Error, ConnectionFailed)

    def guarded(
        queue: PhysicalQueue, role: str, pause: list[float], step: Callable[[], None]
    ) -> None:
        try:
            step()
            pause[0] = cfg.backoff[0]
            return
        except StaleRangeError:
            pass  # logged by on_fenced
        except fenced as exc:
            log(e="fenced", q=queue.key, role=role, err=type(exc).__name__, msg=str(exc)[:160])
        except lost as exc:
            log(e="dberror", q=queue.key, role=role, err=type(exc).__name__, msg=str(exc)[:160])
            with contextlib.suppress(Exception):  # a host that lost its connection reloads
                matching.unload(queue)
        except Exception as exc:
            log(e="crash", q=queue.key, role=role, err=repr(exc), tb=traceback.format_exc())
        stop.wait(pause[0])
        pause[0] = min(pause[0] * 2, cfg.backoff[1])

    def producer(queue: PhysicalQueue, n: int) -> None:
        pause = [cfg.backoff[0]]
        pending: dict[str, Any] = {}

        def step() -> None:
            if not pending:
                run_id = str(uuid.uuid4())
                wf = f"wf-{run_id[:8]}"
                history.add_execution(Execution(run_id, queue.namespace, wf))
                history.schedule_task(run_id, 1, queue.task_type)
                pending["p"] = task_payload(queue.namespace, wf, run_id, queue.task_type, 1)
            payload = pending["p"]
            result = matching.add_task(queue, payload)  # a retry re-sends the same task
            pending.clear()
            log(
                e="produced",
                q=queue.key,
                run=payload["task"]["runId"],
                ev=1,
                id=result.task_id,
                sync=result.sync_matched,
                o=result.outcome.value if result.outcome else None,
            )

        while not stop.is_set() and not drain_flag.exists():
            guarded(queue, f"producer{n}", pause, step)
            stop.wait(cfg.produce_interval)

    def consumer(queue: PhysicalQueue, n: int) -> None:
        pause = [cfg.backoff[0]]
        rnd = random.Random()

        def step() -> None:
            park = cfg.poll_timeout if rnd.random() < cfg.sync_share else 0.0
            if cfg.poll_batch > 1:
                deliveries = matching.poll_batch(queue, cfg.poll_batch, timeout=park)
            else:
                delivery = matching.poll(queue, timeout=park)
                deliveries = [delivery] if delivery is not None else []
            if not deliveries and not park:
                stop.wait(cfg.produce_interval)
            for delivery in deliveries:
                run, ev = identity(delivery.data)
                at = delivery.started_at.isoformat() if delivery.started_at else None
                log(e="delivered", q=queue.key, id=delivery.task_id, run=run, ev=ev, at=at)
            if cfg.start_timeout is None:
                return
            for delivery in deliveries:  # the worker ran it: report the completion
                if rnd.random() < cfg.slow_share:
                    late = threading.Timer(1.5 * cfg.start_timeout, complete_late, (delivery,))
                    late.daemon = True
                    late.start()
                    slow.append(late)
                else:
                    matching.complete(delivery)

        while not stop.is_set():
            guarded(queue, f"consumer{n}", pause, step)

    slow: list[threading.Timer] = []

    def complete_late(delivery: Delivery) -> None:
        """A worker that outlived its start: the timer has dispatched the task again."""
        try:
            matching.complete(delivery)
        except Exception as exc:  # the connection may be away: the start just expires
            log(e="dberror", q=delivery.queue.key, role="late", err=type(exc).__name__)

    owned: dict[str, list[PhysicalQueue]] = {}

    def route(start: ExpiredStart) -> PhysicalQueue | None:
        """One of this host's queues of the task's type (the family is the scenario's);
        None: another host's timer re-dispatches it."""
        mine = owned.get(start.kind)
        return mine[hash(start.run_id) % len(mine)] if mine else None

    def timer_loop() -> None:
        timer = StartTimer(matching, route)
        pause = cfg.backoff[0]
        while not stop.wait(pause):
            try:
                for r in timer.tick():
                    log(
                        e="redispatched",
                        q=r.queue.key,
                        run=r.start.run_id,
                        ev=r.start.scheduled_event_id,
                        at=r.start.started_at.isoformat(),
                        id=r.added.task_id,
                        sync=r.added.sync_matched,
                        o=r.added.outcome.value if r.added.outcome else None,
                        rescheduled=r.rescheduled,
                    )
                pause = cfg.timer_interval
                continue
            except StaleRangeError:
                pass  # logged by on_fenced
            except (QueueUnloaded, NotOwner) as exc:
                log(e="fenced", q="timer", role="timer", err=type(exc).__name__)
            except (psycopg.Error, ConnectionFailed) as exc:
                log(e="dberror", q="timer", role="timer", err=type(exc).__name__)
            except Exception as exc:
                log(e="crash", q="timer", role="timer", err=repr(exc), tb=traceback.format_exc())
            pause = min(max(pause, cfg.backoff[0]) * 2, cfg.backoff[1])

    threads, producers = [], []
    for key in cfg.queues:
        queue = decode(key)
        assert isinstance(queue, PhysicalQueue)
        if not matching.owns(queue):
            continue
        owned.setdefault(queue.task_type, []).append(queue)
        for n in range(cfg.producers_per_queue):
            producers.append(threading.Thread(target=producer, args=(queue, n), daemon=True))
        for n in range(cfg.consumers_per_queue):
            threads.append(threading.Thread(target=consumer, args=(queue, n), daemon=True))
    threads += producers
    if cfg.start_timeout is not None:
        threads.append(threading.Thread(target=timer_loop, daemon=True))
    for t in threads:
        t.start()
    log(e="ready", threads=len(threads))
    # Once drained, say so when no producer can append any more (an append in flight when
    # the flag appeared has returned): the parent waits for this before judging the drain.
    while not stop.wait(0.05):
        if drain_flag.exists() and not any(t.is_alive() for t in producers):
            log(e="producers-stopped")
            break
    stop.wait()
    for t in threads + slow:
        t.join(10)
    try:
        matching.shutdown()
    except Exception as exc:
        log(e="shutdown-error", err=repr(exc))
    store.close()
    log(e="exit")


def main(argv: Sequence[str]) -> None:
    if len(argv) != 1:
        raise SystemExit("usage: python -m bench.common.host CONFIG_JSON (spawned by HostProcess)")
    serve(HostConfig.from_json(argv[0]))


if __name__ == "__main__":
    main(sys.argv[1:])
