"""`plan`'s `estimate_ms` against the real duration of the same statement on the target.

What it does (results: docs/benchmarks.md, "plan: estimate vs real duration"):

1. builds a TARGET database on the shared scratch server: `parent` (10,000 rows) and `big`
   (`--rows` rows, 12 indexes on several columns — some multi-column, one on an expression —
   and a foreign-key-shaped `parent_id` without its constraint), loaded with set-based
   `generate_series` inserts, the indexes built after the load, then `VACUUM ANALYZE`d;
2. for every case — one statement, written as a one-file sqldir migration set into a temp
   dir — and every `--sample` size, calls `queueguard.engine.plan.planner.plan` on TARGET
   and reads the statement's `estimate_ms`;
3. clones TARGET (`CREATE DATABASE … TEMPLATE … STRATEGY FILE_COPY`, so every case starts
   from the same state), runs `CHECKPOINT`, then the statement (in a transaction, or alone
   for CONCURRENTLY) and its commit, timed from the client;
4. reports estimate / actual per case and sample size.

Run from the repository root:

    python -m bench.plan.estimate                  # 1,000,000 rows, samples 20,000 and 100,000
    python -m bench.plan.estimate --rows 200000 --no-docs --json

The server is the one tests use (`QUEUEGUARD_PG`, embedded by default) or `--admin-dsn`.
With `--docs` (default) the table replaces the section of docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from datetime import date
from pathlib import Path

from psycopg import sql

from bench.common.commands import ROOT, shown
from bench.common.doc_sections import replace_section
from queueguard import sets
from queueguard.engine.plan import planner
from queueguard.pg import scratch
from queueguard.pg.connect import connection
from queueguard.pg.scratch import ScratchDatabases

DOCS = ROOT / "docs" / "benchmarks.md"
SECTION = "## plan: estimate vs real duration"
PREFIX = "qg_planbench"
PARENTS = 10_000


@dataclass(frozen=True)
class Case:
    name: str
    kind: str  # rewrite | scan | index
    statement: str


CASES = (
    Case(
        "ADD COLUMN … DEFAULT random()",
        "rewrite",
        "ALTER TABLE big ADD COLUMN x float8 DEFAULT random()",
    ),
    Case("ALTER COLUMN … TYPE bigint", "rewrite", "ALTER TABLE big ALTER COLUMN qty TYPE bigint"),
    Case(
        "ADD COLUMN … GENERATED ALWAYS AS (…) STORED",
        "rewrite",
        "ALTER TABLE big ADD COLUMN total numeric GENERATED ALWAYS AS (qty * price) STORED",
    ),
    Case(
        "ADD CONSTRAINT … CHECK",
        "scan",
        "ALTER TABLE big ADD CONSTRAINT big_qty_check CHECK (qty >= 0 AND price >= 0)",
    ),
    Case(
        "ALTER COLUMN … SET NOT NULL", "scan", "ALTER TABLE big ALTER COLUMN customer SET NOT NULL"
    ),
    Case(
        "ADD CONSTRAINT … FOREIGN KEY",
        "scan",
        "ALTER TABLE big ADD CONSTRAINT big_parent_fk FOREIGN KEY (parent_id) "
        "REFERENCES parent (id)",
    ),
    Case("CREATE INDEX", "index", "CREATE INDEX big_note_idx ON big (note)"),
    Case(
        "CREATE INDEX CONCURRENTLY",
        "index",
        "CREATE INDEX CONCURRENTLY big_account_created_idx ON big (account, created_at)",
    ),
)

TABLES = f"""
CREATE TABLE parent (id int PRIMARY KEY, name text NOT NULL);
INSERT INTO parent SELECT g, 'parent-' || g FROM generate_series(1, {PARENTS}) g;
CREATE TABLE big (
    id bigint NOT NULL,
    parent_id int NOT NULL,
    account int NOT NULL,
    qty int NOT NULL,
    price numeric(10, 2) NOT NULL,
    status text NOT NULL,
    customer text,
    created_at timestamptz NOT NULL,
    updated_at timestamptz,
    flags int NOT NULL,
    note text NOT NULL
);
"""

INSERT = f"""
INSERT INTO big
SELECT g, g % {PARENTS} + 1, (g * 7919) % 100003, g % 1000, (g % 10000) / 100.0,
       (ARRAY['new', 'paid', 'shipped', 'returned'])[g % 4 + 1],
       'customer-' || (g * 31) % 50021,
       timestamptz '2024-01-01' + g * interval '1 second',
       timestamptz '2024-01-01' + ((g * 104729) % 1000003) * interval '1 second',
       g % 64, md5(g::text)
FROM generate_series({{first}}::bigint, {{last}}) g
"""

#: 12 indexes (the primary key included): one to five columns' worth of work per row
INDEXES = (
    "ALTER TABLE big ADD PRIMARY KEY (id)",
    "CREATE INDEX big_parent_idx ON big (parent_id)",
    "CREATE INDEX big_account_idx ON big (account)",
    "CREATE INDEX big_qty_idx ON big (qty)",
    "CREATE INDEX big_price_idx ON big (price)",
    "CREATE INDEX big_status_created_idx ON big (status, created_at)",
    "CREATE INDEX big_customer_idx ON big (customer)",
    "CREATE INDEX big_created_idx ON big (created_at)",
    "CREATE INDEX big_updated_idx ON big (updated_at)",
    "CREATE INDEX big_account_qty_idx ON big (account, qty)",
    "CREATE INDEX big_flags_status_idx ON big (flags, status)",
    "CREATE INDEX big_customer_lower_idx ON big (lower(customer))",
)


def log(message: str) -> None:
    print(f"[bench] {message}", file=sys.stderr, flush=True)


def build_target(dsn: str, rows: int) -> None:
    started = time.monotonic()
    with connection(dsn, autocommit=True) as conn:
        conn.execute("SET synchronous_commit = off")
        conn.execute(TABLES.encode())
        step = 250_000
        for first in range(1, rows + 1, step):
            last = min(rows, first + step - 1)
            conn.execute(INSERT.format(first=first, last=last).encode())
        for statement in INDEXES:
            conn.execute(statement)
        conn.execute("VACUUM (FREEZE, ANALYZE)")
    log(f"target: {rows:,} rows, {len(INDEXES)} indexes in {time.monotonic() - started:.1f} s")


@contextmanager
def clone(databases: ScratchDatabases, template: str) -> Iterator[str]:
    """A FILE_COPY clone of `template` (no WAL for its pages), dropped afterwards."""
    name = f"{PREFIX}_{os.urandom(6).hex()}"
    with connection(databases.admin_dsn, autocommit=True) as conn:
        conn.execute(
            sql.SQL("CREATE DATABASE {} TEMPLATE {} STRATEGY FILE_COPY").format(
                sql.Identifier(name), sql.Identifier(template)
            )
        )
    dsn = scratch.database_dsn(databases.admin_dsn, name)
    try:
        yield dsn
    finally:
        databases.drop(dsn)


def actual_ms(dsn: str, statement: str) -> float:
    """The statement and its commit on `dsn`, timed from the client after a CHECKPOINT (the
    session having planned a query on `big`, so its catalog entries are cached)."""
    concurrent = "CONCURRENTLY" in statement.upper()
    with connection(dsn, autocommit=True) as conn:
        # a live target's backends have its catalog cached: plan a query on `big` first
        conn.execute("SELECT count(*) FROM (SELECT 1 FROM big LIMIT 1) s")
        conn.execute("CHECKPOINT")
        conn.autocommit = concurrent
        started = time.perf_counter()
        conn.execute(statement)
        if not concurrent:
            conn.commit()
        return (time.perf_counter() - started) * 1000


def estimate(case: Case, target: str, sample_rows: int, folder: Path) -> tuple[float, str]:
    migrations = folder / f"{CASES.index(case)}-{sample_rows}"
    migrations.mkdir(exist_ok=True)
    (migrations / "001_case.sql").write_text(case.statement + ";\n")
    result = planner.plan(sets.load(migrations, "sqldir"), target, sample_rows=sample_rows)
    [(_, lines)] = result.revisions
    [line] = lines
    return line.estimate_ms, line.basis


@dataclass
class Row:
    case: str
    kind: str
    rows: int
    sample: int
    estimate_ms: float
    actual_ms: float
    basis: str

    @property
    def ratio(self) -> float:
        return self.estimate_ms / self.actual_ms if self.actual_ms else float("inf")


def run(admin: str, rows: int, samples: list[int], cases: list[Case]) -> list[Row]:
    results: list[Row] = []
    with (
        ScratchDatabases(admin, prefix=PREFIX) as databases,
        tempfile.TemporaryDirectory(prefix="qg-planbench-") as tmp,
    ):
        target = databases.create()
        build_target(target, rows)
        template = scratch.dbname_of(target)
        for case in cases:
            estimates = {n: estimate(case, target, n, Path(tmp)) for n in samples}
            with clone(databases, template) as copy:
                real = actual_ms(copy, case.statement)
            for n, (ms, basis) in estimates.items():
                results.append(Row(case.name, case.kind, rows, n, ms, real, basis))
                log(
                    f"{case.name} (sample {n:,}): estimate {ms:,.0f} ms, actual {real:,.0f} ms, "
                    f"ratio {ms / real:.2f}"
                )
    return results


def section(results: list[Row], command: str, load: tuple[float, float]) -> str:
    out = [
        SECTION,
        "",
        f"Command: `{command}` ({date.today().isoformat()}; {server_note()}; "
        f"{os.cpu_count()} CPUs, Python {platform.python_version()}; 1-minute load average "
        f"{load[0]:.1f} at the start, {load[1]:.1f} at the end: the machine was shared with "
        "other work). One run; every figure below comes from it.",
        "",
        "TARGET: `big` with the row count below and 12 indexes (the primary key, 8 single-column "
        "ones, 3 on two columns or an expression), its indexes built after the load and the "
        f"table `VACUUM (FREEZE, ANALYZE)`d; `parent`, {PARENTS:,} rows, for the foreign key. "
        "Each case is a one-statement sqldir set: `estimate_ms` is "
        "`queueguard.engine.plan.planner.plan(…, sample_rows=…)`'s for that statement (its "
        "sample timed on the scratch copy, scaled by `bill.estimate`); `actual_ms` is the same "
        "statement and its commit on a fresh `CREATE DATABASE … TEMPLATE` copy of TARGET, after "
        "a `CHECKPOINT`, timed from the client. Target ratio: within [0.5, 2].",
        "",
        "| case | kind | rows | sample | estimate_ms | actual_ms | ratio |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        out.append(
            f"| `{r.case}` | {r.kind} | {r.rows:,} | {r.sample:,} | {r.estimate_ms:,.0f} | "
            f"{r.actual_ms:,.0f} | {r.ratio:.2f} |"
        )
    return "\n".join(out) + "\n"


def server_note() -> str:
    with connection(scratch.server_dsn(), autocommit=True) as conn:
        row = conn.execute(
            "SELECT current_setting('server_version'), current_setting('shared_buffers'), "
            "current_setting('maintenance_work_mem'), "
            "current_setting('max_parallel_maintenance_workers')"
        ).fetchone()
    assert row is not None
    return (
        f"PostgreSQL {row[0]}, `shared_buffers` {row[1]}, `maintenance_work_mem` {row[2]}, "
        f"`max_parallel_maintenance_workers` {row[3]}"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument(
        "--sample",
        type=int,
        action="append",
        help="sample rows (repeatable; default 20000 and 100000)",
    )
    parser.add_argument("--case", action="append", help="only the cases whose name holds this")
    parser.add_argument("--admin-dsn", default=None)
    parser.add_argument("--json", action="store_true", help="print the rows as JSON")
    parser.add_argument("--no-docs", dest="docs", action="store_false")
    args = parser.parse_args(argv)
    samples = args.sample or [20_000, 100_000]
    cases = [c for c in CASES if not args.case or any(s in c.name for s in args.case)]
    admin = args.admin_dsn or scratch.server_dsn()
    load_start = os.getloadavg()[0]
    results = run(admin, args.rows, samples, cases)
    flags = [] if args.rows == 1_000_000 else ["--rows", str(args.rows)]
    for n in args.sample or []:
        flags += ["--sample", str(n)]
    text = section(results, shown("bench.plan.estimate", *flags), (load_start, os.getloadavg()[0]))
    if args.json:
        print(json.dumps([asdict(r) | {"ratio": round(r.ratio, 3)} for r in results], indent=2))
    else:
        print(text)
    if args.docs:
        replace_section(DOCS, text)
        log(f"wrote the {SECTION!r} section of {DOCS}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
