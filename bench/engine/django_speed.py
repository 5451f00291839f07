"""Benchmark: queueguard's `upgrade` and `plan` of a Django project next to the native
`python manage.py migrate`, in one run (docs/benchmarks.md, "Django: queueguard next to
manage.py migrate").

The project (bench/common/django_app.py) has `--migrations` migrations of its own across
four apps (foreign keys, RunPython backfills, indexes, check and unique constraints, altered
fields, an `atomic = False` concurrent build in each app, a squash), beside Django's
contenttypes and auth; its settings import an application module. Each round, in turn and
each on a fresh empty database of one server: `manage.py migrate`, `queueguard upgrade
--migrations DIR` and `queueguard plan --migrations DIR` (every migration captured and billed
on a scratch copy). Each is a process of its own, timed from its start to its exit. Figures:
each command's fastest round and the median of its per-round ratio to native; goals: upgrade
≤ 1.2× native, plan ≤ 2× native.

Run from the repository root (the embedded server, or `--admin-dsn`):

    python -m bench.engine.django_speed                  # 40 migrations, 5 rounds
    python -m bench.engine.django_speed --rounds 3 --no-docs
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

from bench.common import django_app
from bench.common.commands import ROOT
from bench.common.doc_sections import replace_section
from bench.common.speed import log, rows, timed
from queueguard.pg import dsn as dsns
from queueguard.pg import scratch
from queueguard.pg.scratch import ScratchDatabases

DOCS = ROOT / "docs" / "benchmarks.md"
SECTION = "## Django: queueguard next to manage.py migrate"
BIN = Path(sys.executable).parent


def _env(dsn: str) -> dict[str, str]:
    """The environment the project's settings read its database from."""
    params = dsns.params(dsn)
    return {
        **os.environ,
        "BENCH_DB_NAME": params["dbname"],
        "BENCH_DB_HOST": params.get("host", "localhost"),
        "BENCH_DB_PORT": params.get("port", "5432"),
        "BENCH_DB_USER": params.get("user", "postgres"),
    }


def run(admin: str, migrations: int, rounds: int) -> tuple[dict[str, list[float]], int]:
    """Each round the three commands one after the other (the order turned round every other
    round); their times, and how many migrations `migrate` applies to an empty database."""
    times: dict[str, list[float]] = {"native": [], "upgrade": [], "plan": []}
    applied = 0
    with (
        tempfile.TemporaryDirectory(prefix="qgbench-django-") as tmp,
        ScratchDatabases(admin, prefix="qgbench") as databases,
    ):
        project = Path(tmp)
        django_app.write(project, migrations)
        for n in range(rounds):
            native, ours, target = databases.create(), databases.create(), databases.create()
            queueguard = str(BIN / "queueguard")
            cases = {
                "native": ([sys.executable, "manage.py", "migrate", "-v0"], _env(native)),
                "upgrade": (
                    [queueguard, "upgrade", "--migrations", str(project), "--dsn", ours],
                    dict(os.environ),
                ),
                "plan": (
                    [
                        queueguard,
                        "plan",
                        "--migrations",
                        str(project),
                        "--dsn",
                        target,
                        "--scratch-dsn",
                        admin,
                    ],
                    dict(os.environ),
                ),
            }
            order = list(cases) if n % 2 == 0 else list(reversed(cases))
            for name in order:
                argv, env = cases[name]
                times[name].append(timed(argv, project, env))
            log(f"round {n + 1}: " + ", ".join(f"{k} {v[-1]:.2f} s" for k, v in times.items()))
            applied = _count(native)
    return times, applied


def _count(dsn: str) -> int:
    import psycopg

    with psycopg.connect(dsn) as conn:
        row = conn.execute("SELECT count(*) FROM django_migrations").fetchone()
    return int(row[0]) if row else 0


def render(times: dict[str, list[float]], migrations: int, applied: int, command: str) -> str:
    rounds = len(times["native"])
    table = rows(
        times,
        [
            ("native", "`python manage.py migrate`", "—"),
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
            f"A Django project of {migrations} migrations of its own across four apps, written "
            "for the benchmark (`bench/common/django_app.py`): tables with foreign keys to each "
            "other, rows written by `RunPython`, backfills, new columns, indexes, check and "
            "unique constraints, altered fields, new child tables, an `atomic = False` "
            "migration building an index concurrently in each app and a squash; with Django's "
            f"contenttypes and auth, `migrate` records {applied} migrations on an empty "
            "database. Its settings import an application module. Each command is a process "
            f"of its own on a fresh empty database, timed start to exit; {rounds} rounds, the "
            "three commands one after the other in each (the order turned round every other "
            "round).",
            "",
            "| command | fastest | each round (s) | fastest ÷ native's | median ratio to "
            "the same round's native | goal |",
            "|---|---:|---|---:|---:|---:|",
            *table,
            "",
            "Where the difference goes (each command timed event by event: the runner's "
            "messages and queueguard's connections): both sides pay one Python start and one "
            "`django.setup()` in the project's interpreter, and Django's `migrate` itself takes "
            "as long in queueguard's runner as under `manage.py`. queueguard starts the "
            "project's runner first thing, before its own imports (`sets/django_start.py`): "
            "the runner imports Django's own modules (about 0.2 s) on the other core while "
            "queueguard imports its CLI and psycopg (about 0.1 s), and the project's settings "
            "and `django.setup()` follow with the target's connection fields, as before; at "
            "the end the runner exits without the interpreter's teardown. `upgrade` adds the "
            "runner-lock session, the nonce looked up in `pg_stat_activity` and the applied "
            "set read before and after. `plan` adds the sample (the two halves of `pg_dump "
            "--schema-only` side by side, a scratch database created and dropped) and, around "
            "each of the migrations' statements, the session's locks, scans and relations read "
            "through the runner (once between two statements of one transaction: the first's "
            "after is the second's before), and the catalog read at each migration's end (what "
            "makes a migration opaque). One runner process serves the whole command: it is "
            "pointed at the target, the scratch copy and back (`sets/django.py`, "
            "`Graph.borrow`).",
        ]
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--admin-dsn", help="a server for scratch databases (default: embedded)")
    parser.add_argument("--migrations", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--no-docs", action="store_true", help="print, do not write docs")
    args = parser.parse_args(argv)
    admin = args.admin_dsn or scratch.server_dsn()
    times, applied = run(admin, args.migrations, args.rounds)
    command = "python -m bench.engine.django_speed"
    command += f" --migrations {args.migrations} --rounds {args.rounds}"
    section = render(times, args.migrations, applied, command)
    print(section)
    if not args.no_docs:
        replace_section(DOCS, section)
    return 0


if __name__ == "__main__":
    sys.exit(main())
