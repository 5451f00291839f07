"""`plan`'s estimate, twice on the same database, against the real statement, on Temporal's
visibility table (docs/benchmarks.md, "plan: the same estimate twice").

What it does, for each `--rows` (default 100,000 and 1,000,000), on one server:

1. applies Temporal's real visibility files up to `--from` (default 1.12; pass the folder
   `schema/postgresql/v12/visibility/versioned` of a checkout of Temporal's public repository:
   the files are read from there, never copied into this repository) and fills
   `executions_visibility` (`bench.engine.online.build`);
2. runs `queueguard.engine.plan.planner.plan(…, to=--to)` on it `--plans` times (default
   2), nothing else running, and keeps each statement's `estimate_ms`;
3. clones the database (`CREATE DATABASE … TEMPLATE`), runs `CHECKPOINT`, then `upgrade`
   to `--to` on the clone, each statement's time as the runner reports it;
4. prints, per statement that took a second or more for real: each plan's estimate, their
   spread (largest ÷ smallest; goal ≤ 1.25) and estimate ÷ real (goal within [0.5, 2]).

Run from the repository root:

    python -m bench.plan.steady --temporal PATH/schema/postgresql/v12/visibility/versioned
    python -m bench.plan.steady --temporal … --rows 100000 --no-docs
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from dataclasses import asdict, dataclass
from datetime import date
from pathlib import Path

import psycopg

from bench.common.commands import ROOT, shown
from bench.common.doc_sections import replace_section
from bench.common.temporal_visibility import build
from queueguard import sets
from queueguard.engine.apply.report import Step
from queueguard.engine.apply.runner import upgrade
from queueguard.engine.plan import planner
from queueguard.pg import scratch
from queueguard.pg.scratch import ScratchDatabases
from queueguard.sets import temporal

DOCS = ROOT / "docs" / "benchmarks.md"
SECTION = "## plan: the same estimate twice"
#: statements shorter than this for real are left out: their estimate is a few milliseconds
#: scaled, and the goal is about the statements a bill is read for
SHOWN_ABOVE_MS = 1000.0


def log(message: str) -> None:
    print(f"[bench] {message}", file=sys.stderr, flush=True)


@dataclass
class Row:
    rows: int
    revision: str
    statement: str
    estimates_ms: list[float]
    actual_ms: float

    @property
    def spread(self) -> float:
        return max(self.estimates_ms) / max(min(self.estimates_ms), 1e-9)

    @property
    def ratios(self) -> list[float]:
        return [e / self.actual_ms for e in self.estimates_ms]


def real_run(mset: sets.MigrationSet, dsn: str, to: str) -> dict[str, float]:
    """{statement: ms} as `upgrade` runs them (one transaction per revision, a concurrent
    build alone), after a CHECKPOINT."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("CHECKPOINT")
    steps: list[Step] = []
    upgrade(mset, dsn, to=to, on_step=steps.append)
    return {_key(step.sql): step.seconds * 1000 for step in steps}


def _key(statement: str) -> str:
    return " ".join(statement.split())


def measure(
    databases: ScratchDatabases, folder: Path, rows: int, start: str, to: str, plans: int
) -> list[Row]:
    admin = databases.admin_dsn
    log(f"building {rows:,} rows at {start}")
    began = time.perf_counter()
    template = build(admin, databases, folder, start, rows)
    log(f"built in {time.perf_counter() - began:.1f} s")
    target = scratch.database_dsn(admin, template)
    mset = sets.load(folder)
    estimates: dict[str, list[float]] = {}
    revision_of: dict[str, str] = {}
    for n in range(plans):
        began = time.perf_counter()
        result = planner.plan(mset, target, to=to)
        log(f"plan {n + 1}: {time.perf_counter() - began:.1f} s")
        for rid, lines in result.revisions:
            for line in lines:
                estimates.setdefault(_key(line.seen.sql), []).append(line.estimate_ms)
                revision_of[_key(line.seen.sql)] = rid
    clone = databases.create(template=template)
    with psycopg.connect(clone) as conn:  # Temporal keys its version row on the name
        temporal.take_over_version(conn, template)
    began = time.perf_counter()
    timed = real_run(mset, clone, to)
    log(f"upgrade: {time.perf_counter() - began:.1f} s")
    databases.drop(clone)  # at 1 M rows a clone takes several GB
    databases.drop(target)
    return [
        Row(rows, revision_of[key], key[:70], estimates[key], round(ms, 1))
        for key, ms in timed.items()
        if ms >= SHOWN_ABOVE_MS and key in estimates
    ]


def render(results: list[Row], args: argparse.Namespace, load: tuple[float, float]) -> str:
    flags = ["--temporal", "…/visibility/versioned"]
    for rows in args.rows or []:
        flags += ["--rows", str(rows)]
    lines = [
        SECTION,
        "",
        f"Command: `{shown('bench.plan.steady', *flags)}` ({date.today().isoformat()}; "
        f"{os.cpu_count()} CPUs, Python {platform.python_version()}; 1-minute load average "
        f"{load[0]:.1f} at the start, {load[1]:.1f} at the end; nothing else running).",
        "",
        f"Temporal's `executions_visibility` at {args.start} (its real files and indexes), "
        f"`plan` to {args.to} run {args.plans} times on the same database, then the same "
        "revisions applied for real by `upgrade` on a clone (after a `CHECKPOINT`), each "
        "statement's time as the runner reports it. Statements that took "
        f"{SHOWN_ABOVE_MS / 1000:g} s or more for real. Goals: spread (largest estimate ÷ "
        "smallest) ≤ 1.25; estimate ÷ real within [0.5, 2]. On the 100,000-row sample the "
        "rewrite takes tens of seconds and runs once (a rewrite is repeated for a median only "
        "under 5 s, docs/migration-sets.md); a concurrent build runs once, outside a "
        "transaction, and is scaled about ×10 at 1,000,000 rows.",
        "",
        "| rows | statement | estimates (ms) | spread | real (ms) | estimate ÷ real |",
        "|---:|---|---|---:|---:|---|",
    ]
    for r in results:
        estimates = " / ".join(f"{e:,.0f}" for e in r.estimates_ms)
        ratios = " / ".join(f"{x:.2f}" for x in r.ratios)
        lines.append(
            f"| {r.rows:,} | `{r.statement}…` | {estimates} | {r.spread:.2f} "
            f"| {r.actual_ms:,.0f} | {ratios} |"
        )
    return "\n".join([*lines, "", *summary(results)]) + "\n"


def summary(results: list[Row]) -> list[str]:
    """Against the goals, per size: the rewrites (`ALTER TABLE`) and the concurrent builds."""
    said = ["Against the goals:", ""]
    for rows in sorted({r.rows for r in results}):
        for kind, prefix in (("rewrite", "ALTER TABLE"), ("concurrent build", "CREATE INDEX")):
            of = [r for r in results if r.rows == rows and r.statement.startswith(prefix)]
            if not of:
                continue
            ratios = [x for r in of for x in r.ratios]
            steady = sum(r.spread <= 1.25 for r in of)
            within = sum(all(0.5 <= x <= 2 for x in r.ratios) for r in of)
            said.append(
                f"- {rows:,} rows, {len(of)} {kind}(s): spread at most "
                f"{max(r.spread for r in of):.2f} ({steady} of {len(of)} within 1.25); "
                f"estimate ÷ real {min(ratios):.2f}–{max(ratios):.2f} ({within} of {len(of)} "
                "within [0.5, 2] in every plan)."
            )
    return said


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.plan.steady", description=__doc__)
    parser.add_argument("--temporal", type=Path, required=True, help="Temporal's versioned dir")
    parser.add_argument("--rows", type=int, action="append", help="repeatable")
    parser.add_argument("--plans", type=int, default=2)
    parser.add_argument("--start", default="1.12")
    parser.add_argument("--to", default="1.13")
    parser.add_argument("--admin-dsn", default=None)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--no-docs", action="store_true")
    args = parser.parse_args(argv)
    admin = args.admin_dsn or scratch.server_dsn()
    load_start = os.getloadavg()[0]
    results: list[Row] = []
    with ScratchDatabases(admin, prefix="qgbench") as databases:
        for rows in args.rows or [100_000, 1_000_000]:
            found = measure(databases, args.temporal, rows, args.start, args.to, args.plans)
            results += found
            log(json.dumps([asdict(r) for r in found]))
    section = render(results, args, (load_start, os.getloadavg()[0]))
    print(json.dumps([asdict(r) for r in results], indent=2) if args.json else section)
    if not args.no_docs:
        replace_section(DOCS, section)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
