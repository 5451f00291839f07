"""Benchmark: the rebuild alone against the plain statement, with no writer, no plan and no
proof — what the shadow rebuild itself costs (docs/benchmarks.md, "Online apply of an
unchanged set": the decomposition under the table).

On two clones of a table at Temporal's `--start` (its real visibility files, read from a
checkout of Temporal's public repository, as `bench.engine.online` builds it): the first
statement of `--to` run plain, and the same statement through `rebuild.run`; prints the
two times and the rebuild's time in its index builds and its replays. And what `plan`
bills the statement for on the table first (its sample scaled to the table's size): the
WAL and the peak extra disk, against what the plain statement and the rebuild wrote
(`plan --online` bills a rebuild the plain statement's WAL and disk, plus its change log at
the writers' rate: none here) — the server's WAL insert position around each, the
database's size sampled, nothing else running.

    python -m bench.engine.rebuild_alone --temporal PATH/schema/postgresql/v12/visibility/versioned
"""

from __future__ import annotations

import argparse
import contextlib
import json
import time
from pathlib import Path
from typing import Any
from unittest.mock import patch

import psycopg

from bench.common.disk_wal import DiskPeak, wal_position, wal_since
from bench.common.temporal_visibility import build
from queueguard import sets
from queueguard.engine.online import rebuild
from queueguard.engine.online.choose import REBUILD, Form
from queueguard.engine.online.context import Context
from queueguard.engine.online.upgrade import ONLINE_LIMITS
from queueguard.engine.plan import planner
from queueguard.pg import scratch
from queueguard.pg.scratch import ScratchDatabases
from queueguard.sets import temporal

TABLE = "executions_visibility"


class Timed:
    """Wraps the rebuild's index builds and replays to add up the seconds spent in each."""

    def __init__(self) -> None:
        self.spent = {"index builds": 0.0, "replays": 0.0}
        self._stack = contextlib.ExitStack()

    def __enter__(self) -> Timed:
        for attribute, name in (("_build_index", "index builds"), ("replay", "replays")):
            timed = self._timed(getattr(rebuild, attribute), name)
            self._stack.enter_context(patch.object(rebuild, attribute, new=timed))
        return self

    def __exit__(self, *exc: object) -> None:
        self._stack.close()

    def _timed(self, work: Any, name: str) -> Any:
        def run(*args: Any, **kwargs: Any) -> Any:
            began = time.perf_counter()
            try:
                return work(*args, **kwargs)
            finally:
                self.spent[name] += time.perf_counter() - began

        return run


class Written:
    """The WAL the server wrote and the database's peak extra disk while the block ran."""

    def __init__(self, dsn: str) -> None:
        self.dsn, self.wal, self.disk = dsn, 0, 0
        self._disk = DiskPeak(dsn)
        self._before = ""

    def __enter__(self) -> Written:
        self._before = wal_position(self.dsn)
        self._disk.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.disk = self._disk.extra()
        self.wal = wal_since(self.dsn, self._before)


def _billed(mset: sets.MigrationSet, dsn: str, to: str) -> tuple[int, int]:
    """`plan`'s WAL and extra disk for the first statement of `to` on the database."""
    bill = planner.plan(mset, dsn, to=to)
    lines = dict(bill.revisions)[to]
    line = next(line for line in lines if line.index == 0)
    return line.wal_bytes or 0, line.extra_disk_bytes or 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.engine.rebuild_alone", description=__doc__
    )
    parser.add_argument("--temporal", type=Path, required=True, help="Temporal's versioned dir")
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--start", default="1.12")
    parser.add_argument("--to", default="1.13")
    parser.add_argument("--admin-dsn", default=None)
    args = parser.parse_args(argv)
    admin = args.admin_dsn or scratch.server_dsn()
    mset = sets.load(args.temporal)
    statements = mset.get(args.to).statements or ()
    statement = statements[0]
    with ScratchDatabases(admin, prefix="qgbench") as databases:
        template = build(admin, databases, args.temporal, args.start, args.rows)
        billed = _billed(mset, scratch.database_dsn(admin, template), args.to)
        plain, online = (databases.create(template=template) for _ in range(2))
        for dsn in (plain, online):
            with psycopg.connect(dsn) as conn:  # Temporal keys its version row on the name
                temporal.take_over_version(conn, template)
        with Written(plain) as plain_wrote, psycopg.connect(plain, autocommit=True) as conn:
            began = time.perf_counter()
            conn.execute(statement)
            plain_s = time.perf_counter() - began
        with Written(online) as online_wrote, psycopg.connect(online) as conn, Timed() as timed:
            began = time.perf_counter()
            rebuild.run(Context(conn, ONLINE_LIMITS), Form(REBUILD, TABLE, statement))
            online_s = time.perf_counter() - began
    mib = 2**20
    result = {
        "rows": args.rows,
        "plain_s": round(plain_s, 1),
        "rebuild_s": round(online_s, 1),
        "ratio": round(online_s / plain_s, 2),
        **{f"{name}_s": round(seconds, 1) for name, seconds in timed.spent.items()},
        "billed_wal_mib": round(billed[0] / mib, 1),
        "plain_wal_mib": round(plain_wrote.wal / mib, 1),
        "rebuild_wal_mib": round(online_wrote.wal / mib, 1),
        "billed_disk_mib": round(billed[1] / mib, 1),
        "plain_disk_mib": round(plain_wrote.disk / mib, 1),
        "rebuild_disk_mib": round(online_wrote.disk / mib, 1),
    }
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
