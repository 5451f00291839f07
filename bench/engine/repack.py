"""Benchmark: queueguard's shadow rebuild next to pg_repack, the reference online rebuild of
PostgreSQL (docs/benchmarks.md, "Rebuild next to pg_repack").

Debian 12 ships pg_repack (`postgresql-15-repack`, 1.4.8) for PostgreSQL 15 only, so both
sides run on the system PostgreSQL 15 (`QUEUEGUARD_PG=system`'s server). One table shaped
like Temporal's `executions_visibility` (our own DDL: its columns and eight indexes), `--rows`
rows, VACUUM ANALYZE, cloned once per case; on each clone `--writers` threads insert, update
and delete from before the case starts to after it ends, and one after the other:

- pg_repack: `CREATE EXTENSION pg_repack`, `pg_repack --table … --no-kill-backend --jobs 1`
  (by default it cancels, then terminates, sessions in its way; `--jobs` equal to the index
  builds the rebuild runs at once: one);
- queueguard: `rebuild.run` of a statement that rewrites the table without changing what it
  holds, `ALTER COLUMN status TYPE integer USING status + 0` (with `USING status`
  PostgreSQL sees no change and does not rewrite: the bench checks that the plain statement
  gives the table a new relfilenode).

Per case: total time, the longest read- or write-blocking lock on the table (pg_locks every
5 ms), the writers' longest wait, the WAL written (server-wide: the writers' included) and
the peak extra disk (the database's size, sampled, above where it started).

    python -m bench.engine.repack [--rows 1000000] [--writers 4] [--no-docs]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import time
from pathlib import Path
from typing import Any

import psycopg
from psycopg.types.numeric import Int8

from bench.common.commands import ROOT, shown
from bench.common.disk_wal import DiskPeak, wal_position, wal_since
from bench.common.doc_sections import replace_section
from bench.common.temporal_visibility import FILL, TABLE
from bench.engine.online import LockSampler, Writers, measured
from queueguard.engine.online import rebuild
from queueguard.engine.online.choose import REBUILD, Form
from queueguard.engine.online.context import Context
from queueguard.engine.online.upgrade import ONLINE_LIMITS
from queueguard.pg import scratch, servers
from queueguard.pg.dsn import params
from queueguard.pg.scratch import ScratchDatabases

DOCS = ROOT / "docs" / "benchmarks.md"
SECTION = "## Rebuild next to pg_repack"
MAJOR = "15"
PG_REPACK = servers.SYSTEM_PG_ROOT / MAJOR / "bin" / "pg_repack"
HEADER = (
    "| case | total | longest blocking lock | writers' longest wait | WAL | peak extra disk "
    "| load (1 min) |\n|---|---|---|---|---|---|---|"
)
STATEMENT = f"ALTER TABLE {TABLE} ALTER COLUMN status TYPE integer USING status + 0"
SHAPE = f"""
CREATE TABLE {TABLE} (
    namespace_id char(64) NOT NULL,
    run_id char(64) NOT NULL,
    start_time timestamp NOT NULL,
    execution_time timestamp NOT NULL,
    workflow_id varchar(255) NOT NULL,
    workflow_type_name varchar(255) NOT NULL,
    status integer NOT NULL,
    close_time timestamp,
    history_length bigint,
    memo bytea,
    encoding varchar(64) NOT NULL,
    task_queue varchar(255) NOT NULL DEFAULT '',
    search_attributes jsonb,
    PRIMARY KEY (namespace_id, run_id)
);
CREATE INDEX ev_by_start ON {TABLE} (namespace_id, start_time DESC, run_id);
CREATE INDEX ev_by_close ON {TABLE} (namespace_id, close_time DESC, run_id);
CREATE INDEX ev_by_type ON {TABLE} (namespace_id, workflow_type_name, close_time DESC);
CREATE INDEX ev_by_workflow ON {TABLE} (namespace_id, workflow_id, close_time DESC);
CREATE INDEX ev_by_status ON {TABLE} (namespace_id, status, close_time DESC);
CREATE INDEX ev_by_queue ON {TABLE} (namespace_id, task_queue, close_time DESC);
CREATE INDEX ev_by_length ON {TABLE} (namespace_id, history_length, close_time DESC);
CREATE INDEX ev_attributes ON {TABLE} USING gin (search_attributes jsonb_path_ops);
"""


def missing() -> str | None:
    """Why the pg_repack side cannot run here, or None."""
    if not PG_REPACK.is_file():
        return f"{PG_REPACK} is missing: apt-get install postgresql-{MAJOR}-repack"
    control = Path(f"/usr/share/postgresql/{MAJOR}/extension/pg_repack.control")
    if not control.is_file():
        return f"{control} is missing: apt-get install postgresql-{MAJOR}-repack"
    if not (servers.SYSTEM_PG_ROOT / MAJOR / "bin" / "initdb").is_file():
        return f"PostgreSQL {MAJOR}'s server is missing: apt-get install postgresql-{MAJOR}"
    return None


def build(databases: ScratchDatabases, rows: int) -> str:
    dsn = databases.create()
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(SHAPE)
        step = 200_000
        for first in range(1, rows + 1, step):
            last = min(rows, first + step - 1)  # bigint: a smallint is ambiguous there
            conn.execute(FILL, {"first": Int8(first), "last": Int8(last)})
        conn.execute("VACUUM ANALYZE")
    return scratch.dbname_of(dsn)


def _relfilenode(dsn: str) -> int:
    with psycopg.connect(dsn) as conn:
        row = conn.execute(f"SELECT pg_relation_filenode('{TABLE}')").fetchone()
        return int(row[0]) if row else 0


def _repack(dsn: str) -> None:
    found = params(dsn)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS pg_repack")
    where = [f"--{key}={found[key]}" for key in ("host", "port") if key in found]
    env = dict(os.environ)  # the password, if any, through the environment, never argv
    if "password" in found:
        env["PGPASSWORD"] = found["password"]
    done = subprocess.run(
        [str(PG_REPACK), f"--table=public.{TABLE}", "--no-kill-backend", "--jobs=1", *where,
         f"--username={found.get('user', 'postgres')}", f"--dbname={found['dbname']}"],
        capture_output=True, text=True, check=False, env=env,
    )  # fmt: skip
    if done.returncode != 0:
        raise SystemExit(f"pg_repack failed: {done.stderr[-2000:]}")


def _rebuild(dsn: str) -> None:
    with psycopg.connect(dsn, application_name="queueguard-bench-rebuild") as conn:
        rebuild.run(Context(conn, ONLINE_LIMITS), Form(REBUILD, TABLE, STATEMENT))


def case(name: str, dsn: str, rows: int, writers_n: int) -> dict[str, Any]:
    app = "pg_repack%" if name == "pg_repack" else "queueguard%"
    writers, sampler = Writers(dsn, writers_n, rows), LockSampler(dsn, app_name=app)
    disk = DiskPeak(dsn)
    before, node = wal_position(dsn), _relfilenode(dsn)
    disk.start()
    sampler.start()
    writers.start()
    try:
        time.sleep(1.0)
        began = time.perf_counter()
        _repack(dsn) if name == "pg_repack" else _rebuild(dsn)
        total = time.perf_counter() - began
        time.sleep(1.0)
    finally:  # a failure stops the threads too
        writers.stop()
        sampler.stop()
        extra = disk.extra()
    if writers.errors:
        raise SystemExit(f"{name}: writers failed: {writers.errors[:3]}")
    if _relfilenode(dsn) == node:
        raise SystemExit(f"{name}: the table kept its file: nothing was rewritten")
    return {
        **measured(name, total, sampler, writers),
        "wal_mb": round(wal_since(dsn, before) / 2**20, 1),
        "extra_disk_mb": round(extra / 2**20, 1),
        "load": [round(min(sampler.loads, default=0), 1), round(max(sampler.loads, default=0), 1)],
    }


def run(rows: int, writers: int) -> list[dict[str, Any]]:
    """Both cases on the system PostgreSQL 15, each on its own clone of one table."""
    admin = scratch.server_dsn("system")
    with ScratchDatabases(admin, prefix="qgrepack") as databases:
        template = build(databases, rows)
        plain = databases.create(template=template)
        node = _relfilenode(plain)
        with psycopg.connect(plain, autocommit=True) as conn:
            conn.execute(STATEMENT)
        if _relfilenode(plain) == node:
            raise SystemExit(f"the plain statement did not rewrite {TABLE}: {STATEMENT}")
        return [
            case(name, databases.create(template=template), rows, writers)
            for name in ("pg_repack", "queueguard")
        ]


def render(results: list[dict[str, Any]], args: argparse.Namespace) -> str:
    by = {r["case"]: r for r in results}
    ratio = by["queueguard"]["total_s"] / max(by["pg_repack"]["total_s"], 1e-9)
    rows = "\n".join(
        f"| {r['case']} | {r['total_s']} s | {_lock(r)} "
        f"| {r['writer_longest_ms']} ms | {r['wal_mb']} MB | {r['extra_disk_mb']} MB | "
        f"{r['load'][0]}–{r['load'][1]} |"
        for r in results
    )
    ours, theirs = by["queueguard"], by["pg_repack"]
    lock_goal = "met" if ours["longest_lock_ms"] <= theirs["longest_lock_ms"] else "missed"
    wait_goal = "met" if ours["writer_longest_ms"] <= theirs["writer_longest_ms"] else "missed"
    command = shown("bench.engine.repack", "--rows", str(args.rows), "--writers",
                    str(args.writers))  # fmt: skip
    return f"""{SECTION}

`{command}` — on the system PostgreSQL {MAJOR} ({platform.machine()}, {os.cpu_count()} cores),
pg_repack {_version()} next to queueguard's shadow rebuild, each on its own clone of one
table shaped like Temporal's `executions_visibility` ({args.rows:,} rows, eight indexes and
its key) under {args.writers} writers inserting, updating and deleting. pg_repack: `--table
--no-kill-backend --jobs 1`; queueguard: `rebuild.run` of `{STATEMENT}` (the plain
statement gives the table a new file; `USING status` would not). WAL is server-wide (the
writers' included); extra disk is the database's peak size above its start.

{HEADER}
{rows}

queueguard's rebuild took {ratio:.2f}× pg_repack's time (goal ≤ 1.5×:
{"met" if ratio <= 1.5 else "missed"}); its longest blocking lock seen {lock_goal} the goal
(no longer than pg_repack's), its writers' longest wait {wait_goal} it
({ours["writer_longest_ms"]} ms against {theirs["writer_longest_ms"]} ms). A lock is timed
from the first to the last sample of `pg_locks` (one every 5 ms or so) that shows the tool
holding it: one seen in a single sample, or in none, is "under one sample" — the lock
column tells the two tools apart only above that. Measured {time.strftime("%Y-%m-%d %H:%M")}
UTC.
"""


def _lock(result: dict[str, Any]) -> str:
    if not result["lock_mode"]:
        return "under one sample"
    return f"{result['longest_lock_ms']} ms ({result['lock_mode']})"


def _version() -> str:
    done = subprocess.run([str(PG_REPACK), "--version"], capture_output=True, text=True)
    return done.stdout.strip().split()[-1] if done.returncode == 0 else "?"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.engine.repack")
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--writers", type=int, default=4)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--no-docs", action="store_true")
    args = parser.parse_args(argv)
    why = missing()
    if why:
        raise SystemExit(f"pg_repack cannot run here: {why}")
    results = run(args.rows, args.writers)
    text = render(results, args)
    print(json.dumps(results, indent=2) if args.json else text)
    if not args.no_docs:
        replace_section(DOCS, text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
