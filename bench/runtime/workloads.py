"""The runtime benchmark's workloads, each run in a child process of `bench.runtime`.

    python -m bench.runtime.workloads MODE --dsn DSN --tasks N --producers P --consumers C

MODE is `one-by-one` or `batched` (queueguard's Matching) or `procrastinate` (the peer
queue, the `bench` extra). The child prints its figures as one JSON object: end-to-end
tasks/s, spool → dispatch latency percentiles (a fixed log-bucket histogram, so memory does
not grow with the task count), peak RSS of this process, and the final state it verified.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import resource
import threading
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from queueguard.core.history import task_payload
from queueguard.core.keys import PhysicalQueue
from queueguard.pg.connect import connection
from queueguard.runtime.matching import Matching
from queueguard.stores.postgres import PostgresStore

QUEUEGUARD_MODES: dict[str, dict[str, Any]] = {
    # Matching's defaults, the runtime's path before its batching options: one append
    # transaction per spooled task, one History start per delivery, a checkpoint after every
    # ack that moves the ack level
    "one-by-one": {},
    "batched": {
        "spool_batch": 1000,
        "checkpoint_every": 1000,
        "checkpoint_interval": 0.05,
        "read_batch": 1000,
    },
}
POLL_BATCH = {"one-by-one": 1, "batched": 100}


def run_id(i: int) -> str:
    """Task i's run: a uuid History knows (made set-based in SQL by `setup_history`)."""
    return str(uuid.UUID(int=i))


# latency histogram -------------------------------------------------------------------------
@dataclass
class Histogram:
    """Log buckets of 2 % from 1 µs: percentiles within 2 %, memory independent of count."""

    ratio: float = 1.02
    counts: dict[int, int] = field(default_factory=dict)
    n: int = 0

    def add(self, seconds: float) -> None:
        bucket = int(math.log(max(seconds, 1e-6) / 1e-6) / math.log(self.ratio))
        self.counts[bucket] = self.counts.get(bucket, 0) + 1
        self.n += 1

    def percentile(self, q: float) -> float:
        """Upper edge of the bucket holding the q-quantile, in seconds."""
        rank, seen = math.ceil(q * self.n), 0
        for bucket in sorted(self.counts):
            seen += self.counts[bucket]
            if seen >= rank:
                return 1e-6 * self.ratio ** (bucket + 1)
        return 0.0


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB


def child_queueguard(
    dsn: str, mode: str, tasks: int, producers: int, consumers: int
) -> dict[str, Any]:
    queue = PhysicalQueue("bench", "orders", "workflow", 0)
    store = PostgresStore(dsn, host_id=f"bench-{mode}", pool_size=producers + consumers + 2)
    matching = Matching(store, host_id=f"bench-{mode}", **QUEUEGUARD_MODES[mode])
    mgr = matching.manager(queue)  # load before the clock starts
    batch = POLL_BATCH[mode]
    hist, lock, done = Histogram(), threading.Lock(), threading.Event()
    counters = {"delivered": 0, "sync": 0, "polls": 0, "empty": 0}
    errors: list[BaseException] = []

    def produce(k: int) -> None:
        try:
            for i in range(k + 1, tasks + 1, producers):
                enqueued = datetime.now(UTC).isoformat()
                data = task_payload("bench", f"wf-{i}", run_id(i), "workflow", 1, 1, enqueued)
                if matching.add_task(queue, data).sync_matched:
                    with lock:
                        counters["sync"] += 1
        except BaseException as exc:
            errors.append(exc)
            done.set()

    def consume() -> None:
        pause = 0.0005
        try:
            while not done.is_set():
                if batch == 1:
                    one = matching.poll(queue)
                    got = [one] if one is not None else []
                else:
                    got = matching.poll_batch(queue, batch)
                now = datetime.now(UTC)
                with lock:
                    counters["polls"] += 1
                    for d in got:
                        hist.add(
                            (now - datetime.fromisoformat(d.data["enqueuedAt"])).total_seconds()
                        )
                    counters["delivered"] += len(got)
                    if counters["delivered"] >= tasks:
                        done.set()
                if got:
                    pause = 0.0005
                else:  # nothing stored yet: back off (an empty poll is a read round trip)
                    counters["empty"] += 1
                    time.sleep(pause)
                    pause = min(pause * 2, 0.01)
        except BaseException as exc:
            errors.append(exc)
            done.set()

    threads = [threading.Thread(target=produce, args=(k,)) for k in range(producers)]
    threads += [threading.Thread(target=consume) for _ in range(consumers)]
    started = time.perf_counter()
    for t in threads:
        t.start()
    done.wait()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    matching.shutdown()  # flushes the last checkpoint: part of the end-to-end time
    elapsed = time.perf_counter() - started
    appends = mgr.spooler.appends if mgr.spooler is not None else tasks - counters["sync"]
    with store.transaction() as conn:
        row = conn.execute(
            "SELECT q.ack_level, q.last_task_id, (SELECT count(*) FROM tasks),"
            " (SELECT count(*) FROM scheduled_tasks WHERE started_at IS NOT NULL)"
            " FROM task_queues q WHERE q.physical_queue = %s",
            (queue.key,),
        ).fetchone()
    store.close()
    assert row is not None
    ack_level, last_task_id, rows_left, starts = row
    ok = ack_level == last_task_id == tasks and rows_left == 0 and starts == tasks
    return {
        "workload": f"queueguard {mode}",
        "tasks": tasks,
        "seconds": elapsed,
        "tasks_per_s": tasks / elapsed,
        "p50_ms": hist.percentile(0.50) * 1000,
        "p99_ms": hist.percentile(0.99) * 1000,
        "peak_rss_mb": peak_rss_mb(),
        "sync_matched": counters["sync"],
        "append_transactions": appends,
        "polls": counters["polls"],
        "empty_polls": counters["empty"],
        "verified": bool(ok),
        "final_state": [ack_level, last_task_id, rows_left, starts],
    }


def child_procrastinate(dsn: str, tasks: int, producers: int, consumers: int) -> dict[str, Any]:
    import procrastinate

    hist = Histogram()
    state = {"n": 0}
    app = procrastinate.App(
        connector=procrastinate.PsycopgConnector(
            conninfo=dsn,
            min_size=1,
            max_size=producers + consumers + 4,
            kwargs={"application_name": "bench-procrastinate"},
        )
    )
    done: asyncio.Event | None = None

    async def run_noop(i: int, t: float) -> None:
        hist.add(time.time() - t)
        state["n"] += 1
        if state["n"] >= tasks and done is not None:
            done.set()

    # registered by a call, not as a decorator: mypy sees the task as Any either way (the
    # `bench` extra may not be installed where the code is type-checked)
    noop = app.task(name="bench_noop", queue="bench")(run_noop)

    async def main() -> float:
        nonlocal done
        done = asyncio.Event()
        async with app.open_async():
            worker = asyncio.create_task(
                app.run_worker_async(
                    queues=["bench"],
                    concurrency=consumers,
                    wait=True,
                    install_signal_handlers=False,
                    delete_jobs="always",
                    listen_notify=True,
                    fetch_job_polling_interval=0.5,
                )
            )
            await asyncio.sleep(1.0)  # the worker registers and listens before the clock

            async def produce(k: int) -> None:
                for i in range(k + 1, tasks + 1, producers):
                    await noop.defer_async(i=i, t=time.time())

            started = time.perf_counter()
            await asyncio.gather(*(produce(k) for k in range(producers)))
            await done.wait()
            worker.cancel()  # graceful: running jobs finish (and are deleted) first
            with contextlib.suppress(asyncio.CancelledError):
                await worker
            return time.perf_counter() - started

    elapsed = asyncio.run(main())
    with connection(dsn) as conn:
        left = conn.execute("SELECT count(*) FROM procrastinate_jobs").fetchone()
    return {
        "workload": f"procrastinate {procrastinate.__version__}",
        "tasks": tasks,
        "seconds": elapsed,
        "tasks_per_s": tasks / elapsed,
        "p50_ms": hist.percentile(0.50) * 1000,
        "p99_ms": hist.percentile(0.99) * 1000,
        "peak_rss_mb": peak_rss_mb(),
        "verified": state["n"] == tasks and left is not None and left[0] == 0,
        "final_state": [state["n"], left[0] if left else None],
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("mode", choices=[*QUEUEGUARD_MODES, "procrastinate"])
    parser.add_argument("--dsn", required=True)
    parser.add_argument("--tasks", type=int, required=True)
    parser.add_argument("--producers", type=int, required=True)
    parser.add_argument("--consumers", type=int, required=True)
    args = parser.parse_args(argv)
    if args.mode == "procrastinate":
        result = child_procrastinate(args.dsn, args.tasks, args.producers, args.consumers)
    else:
        result = child_queueguard(args.dsn, args.mode, args.tasks, args.producers, args.consumers)
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
