"""Benchmark: queueguard's `upgrade` and `plan` of an Alembic project next to the native
`alembic upgrade head`, in one run (docs/benchmarks.md, "Alembic: queueguard next to
alembic upgrade").

The project (bench/common/alembic_app.py) has `--revisions` revisions and an env.py that
imports the application (about a second of imports). Each round, in turn and each on a fresh
empty database of one server: the native `alembic upgrade head` (its CLI, run from the
project's folder), `queueguard upgrade --migrations DIR`, and `queueguard plan --migrations
DIR` (against an empty target: every revision billed on a scratch copy). Each is a process
of its own, timed from its start to its exit, so each pays its own imports. On a shared
machine one round's three commands see about the same load: the figures are each command's
fastest round and the median of its per-round ratio to native; goals: upgrade ≤ 1.2× native,
plan ≤ 2× native.

Run from the repository root (the embedded server, or `--admin-dsn`):

    python -m bench.engine.alembic_speed                  # 44 revisions, 5 rounds
    python -m bench.engine.alembic_speed --rounds 3 --no-docs
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.common import alembic_app
from bench.common.commands import ROOT
from bench.common.doc_sections import replace_section
from bench.common.speed import log, rows, timed
from queueguard.pg import scratch
from queueguard.pg.scratch import ScratchDatabases
from queueguard.sets.alembic_config import ini_value
from queueguard.sets.alembic_dsn import sqlalchemy_url

DOCS = ROOT / "docs" / "benchmarks.md"
SECTION = "## Alembic: queueguard next to alembic upgrade"
BIN = Path(sys.executable).parent


def _import_s(project: Path) -> float:
    """How long importing the application takes (env.py's first line of work)."""
    code = (
        "import time; t = time.perf_counter(); import benchapp.models; "
        "print(time.perf_counter() - t)"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=project, capture_output=True, text=True)
    return float(out.stdout.strip() or 0)


def run(admin: str, revisions: int, rounds: int) -> tuple[dict[str, list[float]], float]:
    """Each round the three commands one after the other (the order turned round every other
    round, so none always runs first); their times, and the application's import time."""
    times: dict[str, list[float]] = {"native": [], "upgrade": [], "plan": []}
    with (
        tempfile.TemporaryDirectory(prefix="qgbench-alembic-") as tmp,
        ScratchDatabases(admin, prefix="qgbench") as databases,
    ):
        project = Path(tmp)
        alembic_app.write(project, revisions, url="postgresql+psycopg://placeholder/none")
        imports = _import_s(project)
        log(f"{revisions} revisions in {project}; importing the application takes {imports:.2f} s")
        for n in range(rounds):
            native, ours, target = databases.create(), databases.create(), databases.create()
            alembic_app.set_url(project, ini_value(sqlalchemy_url(native)).replace("%%", "%"))
            queueguard = str(BIN / "queueguard")
            cases = {
                "native": [str(BIN / "alembic"), "upgrade", "head"],
                "upgrade": [queueguard, "upgrade", "--migrations", str(project), "--dsn", ours],
                "plan": [
                    queueguard,
                    "plan",
                    "--migrations",
                    str(project),
                    "--dsn",
                    target,
                    "--scratch-dsn",
                    admin,
                ],
            }
            order = list(cases) if n % 2 == 0 else list(reversed(cases))
            for name in order:
                times[name].append(timed(cases[name], project))
            log(f"round {n + 1}: " + ", ".join(f"{k} {v[-1]:.2f} s" for k, v in times.items()))
    return times, imports


def render(times: dict[str, list[float]], revisions: int, imports: float, command: str) -> str:
    rounds = len(times["native"])
    table = rows(
        times,
        [
            ("native", "`alembic upgrade head`", "—"),
            ("upgrade", "`queueguard upgrade --migrations DIR`", "≤ 1.2×"),
            ("plan", "`queueguard plan --migrations DIR`", "≤ 2×"),
        ],
    )
    load = os.getloadavg()[0]
    return "\n".join(
        [
            SECTION,
            "",
            f"Command: `{command}` ({time.strftime('%Y-%m-%d')}; Python "
            f"{platform.python_version()}, {os.cpu_count()} CPUs; 1-minute load average "
            f"{load:.1f} at the end).",
            "",
            f"An Alembic project of {revisions} revisions written for the benchmark "
            "(`bench/common/alembic_app.py`): tables with foreign keys and rows, new "
            "columns, indexes (one in seven built concurrently in `autocommit_block()`), "
            "unique constraints, data migrations, a branch for another dialect; its env.py is "
            "Alembic's generic one importing the application (ORM models and the libraries it "
            f"uses: {imports:.1f} s of imports in this run). Each command is a process of its "
            f"own on a fresh empty database, timed start to exit; {rounds} rounds, the three "
            "commands one after the other in each (the order turned round every other round).",
            "",
            "| command | fastest | each round (s) | fastest ÷ native's | median ratio to "
            "the same round's native | goal |",
            "|---|---:|---|---:|---:|---:|",
            *table,
        ]
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--admin-dsn", help="a server for scratch databases (default: embedded)")
    parser.add_argument("--revisions", type=int, default=44)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--no-docs", action="store_true", help="print, do not write docs")
    args = parser.parse_args(argv)
    admin = args.admin_dsn or scratch.server_dsn()
    times, imports = run(admin, args.revisions, args.rounds)
    command = "python -m bench.engine.alembic_speed"
    command += f" --revisions {args.revisions} --rounds {args.rounds}"
    section = render(times, args.revisions, imports, command)
    print(section)
    if not args.no_docs:
        replace_section(DOCS, section)
    return 0


if __name__ == "__main__":
    sys.exit(main())
