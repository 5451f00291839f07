"""Benchmark: `queueguard fleet upgrade` next to the loop a user writes today (docs/
benchmarks.md, "Fleets").

On the embedded server, two fleets of a plain SQL directory set of six revisions (a table,
a column, a concurrent index, a foreign key to a shared table, a backfill, a NOT NULL):

- `--databases N` databases (default 200), and `--schemas M` schemas in one database
  (default 1000), each target's table holding between 100 and 10,000 rows (a 100× spread);
- for each fleet, with every file pending: the floor a user can write — a sequential shell
  loop of `psql -v ON_ERROR_STOP=1 -f FILE` per file per target (no bookkeeping, no
  timeouts, no lock ladder) — and `queueguard fleet upgrade --parallel 8` on an identical
  fresh fleet; then `fleet upgrade` again with every target at head;
- on the database fleet, 1, 2 and 3 runners on one control database, each case on a fresh
  fleet (the speed-up until the wave's cap and the machine's 2 cores bind).

Each case builds its fleet anew; the times are wall-clock for the whole command. Run from
the repository root:

    python -m bench.fleet
    python -m bench.fleet --databases 20 --schemas 100 --no-docs
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import psycopg

from bench.common import alembic_app
from bench.common.commands import QUEUEGUARD, ROOT, shown
from bench.common.doc_sections import replace_section
from queueguard.pg import scratch
from queueguard.pg.dsn import params, with_params

DOCS = ROOT / "docs" / "benchmarks.md"
SECTION = "## Fleets"
SET = {
    "0001_items.sql": "CREATE TABLE items (id bigint PRIMARY KEY, tenant_id int, note text, "
    "owner_id bigint);\n",
    "0002_status.sql": "ALTER TABLE items ADD COLUMN status text;\n",
    "0003_owner_idx.sql": "CREATE INDEX CONCURRENTLY items_owner_idx ON items (owner_id);\n",
    "0004_tenant_fk.sql": "ALTER TABLE items ADD CONSTRAINT items_tenant_fk FOREIGN KEY "
    "(tenant_id) REFERENCES public.tenants (id);\n",
    "0005_backfill.sql": "UPDATE items SET status = 'new' WHERE status IS NULL;\n",
    "0006_not_null.sql": "ALTER TABLE items ALTER COLUMN status SET NOT NULL;\n",
}
#: the rows each target's table holds before the run (0001 is applied by the setup, so the
#: table exists to fill; the loop and the fleet apply 0002–0006)
LOW, HIGH = 100, 10_000


def log(message: str) -> None:
    print(f"[bench] {message}", file=sys.stderr, flush=True)


def rows_of(i: int, n: int) -> int:
    """100 to 10,000 rows, spread evenly on a log scale."""
    spread: float = (HIGH / LOW) ** (i / max(1, n - 1))
    return round(LOW * spread)


def write_set(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in SET.items():
        (folder / name).write_text(text)
    return folder


def make_databases(admin: str, tag: str, n: int) -> list[str]:
    """n databases, each with its shared `tenants` table; `items` comes with 0001."""
    names = []
    with psycopg.connect(admin, autocommit=True) as conn:
        for i in range(n):
            name = f"qgbf{tag}_{i:04d}"
            conn.execute(f'CREATE DATABASE "{name}"')
            names.append(name)
    for name in names:
        with psycopg.connect(with_params(admin, dbname=name), autocommit=True) as conn:
            conn.execute(TENANTS)
    return names


TENANTS = (
    "CREATE TABLE public.tenants (id int PRIMARY KEY);"
    "INSERT INTO public.tenants SELECT g FROM generate_series(1, 50) g;"
)
#: 0001 applied by hand and the table filled: what each target holds before the run (its
#: rows then make the backfill, the index and the key's validation cost what they cost)
SEED = (
    "INSERT INTO items (id, tenant_id, note, owner_id) "
    "SELECT g, 1 + g % 50, 'note ' || g, g % 97 FROM generate_series(1, {rows}) g;"
)


def seed_databases(admin: str, names: list[str]) -> None:
    for i, name in enumerate(names):
        with psycopg.connect(with_params(admin, dbname=name), autocommit=True) as conn:
            conn.execute(SET["0001_items.sql"])
            conn.execute(SEED.format(rows=rows_of(i, len(names))))


def make_schemas(admin: str, tag: str, m: int) -> tuple[str, list[str]]:
    name = f"qgbf{tag}_schemas"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    dsn = with_params(admin, dbname=name)
    schemas = [f"tenant_{i:04d}" for i in range(m)]
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(TENANTS)
        for i, schema in enumerate(schemas):
            conn.execute(f"CREATE SCHEMA {schema}; SET search_path = {schema};"
                         + SET["0001_items.sql"] + SEED.format(rows=rows_of(i, m)))  # fmt: skip
    return dsn, schemas


def drop(admin: str, tag: str) -> None:
    with psycopg.connect(admin, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT datname FROM pg_database WHERE datname LIKE %s", (f"qgbf{tag}\\_%",)
        ).fetchall()
        for (name,) in rows:
            conn.execute(f'DROP DATABASE "{name}" WITH (FORCE)')


def psql_loop(targets: Sequence[tuple[str, str | None]], folder: Path) -> float:
    """The floor: psql -f per pending file per target, one after another."""
    files = sorted(folder.glob("*.sql"))[1:]  # 0001 is in place already
    began = time.perf_counter()
    for dsn, schema in targets:
        env = {**os.environ}
        if schema:
            env["PGOPTIONS"] = f"-c search_path={schema}"
        for f in files:
            subprocess.run(
                ["psql", "-q", "-X", "-v", "ON_ERROR_STOP=1", "-f", str(f), dsn],
                check=True, env=env, stdout=subprocess.DEVNULL,
            )  # fmt: skip
    return time.perf_counter() - began


def ledger_at_0001(targets: Sequence[tuple[str, str | None]]) -> None:
    """queueguard's sqldir ledger saying 0001 is applied (as a user's earlier run left it)."""
    import hashlib

    checksum = hashlib.sha256(SET["0001_items.sql"].encode()).hexdigest()
    by_db: dict[str, list[str | None]] = {}
    for dsn, schema in targets:
        by_db.setdefault(dsn, []).append(schema)
    for dsn, schemas in by_db.items():
        with psycopg.connect(dsn, autocommit=True) as conn:
            for schema in schemas:
                where = f"{schema}." if schema else ""
                conn.execute(
                    f"CREATE TABLE {where}queueguard_sqldir_ledger (revision text PRIMARY KEY, "
                    "checksum text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now());"
                    f"INSERT INTO {where}queueguard_sqldir_ledger (revision, checksum) "
                    f"VALUES ('0001', '{checksum}')"
                )


def fleet(
    targets_file: Path, control: str, *args: str, runners: int = 1
) -> tuple[float, list[int]]:
    command = [QUEUEGUARD, "fleet", "upgrade", "--targets", str(targets_file),
               "--control", control, *args]  # fmt: skip
    began = time.perf_counter()
    procs = [
        subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        for _ in range(runners)
    ]
    codes = []
    for p in procs:
        _, err = p.communicate()
        codes.append(p.returncode)
        if p.returncode != 0:
            log(err[-2000:])
    return time.perf_counter() - began, codes


def plan(path: Path) -> dict[str, object]:
    """`fleet plan --json` of the fleet before its upgrade."""
    done = subprocess.run(
        [QUEUEGUARD, "fleet", "plan", "--targets", str(path), "--json"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    if done.returncode not in (0, 1):
        raise SystemExit(f"fleet plan failed: {done.stderr[-2000:]}")
    loaded: dict[str, object] = json.loads(done.stdout)
    return loaded


def compare(predicted: dict[str, object], control: str, took: float) -> dict[str, object]:
    """fleet plan's time per target against the time each took in the run (the control
    database's elapsed_ms), and its whole-run time against the run's."""
    with psycopg.connect(control) as conn:
        rows = conn.execute("SELECT name, elapsed_ms FROM queueguard_fleet.targets").fetchall()
        span = conn.execute(
            "SELECT extract(epoch FROM max(finished_at) - min(started_at)) "
            "FROM queueguard_fleet.targets WHERE started_at IS NOT NULL"
        ).fetchone()
    actual: dict[str, int] = {str(r[0]): int(r[1]) for r in rows if r[1] is not None}
    ratios = []
    for t in predicted["targets"]:  # type: ignore[attr-defined]
        real = actual.get(t["name"])
        if real and t.get("estimateMs"):
            ratios.append(max(real, t["estimateMs"]) / max(1e-3, min(real, t["estimateMs"])))
    ratios.sort()
    within = sum(1 for r in ratios if r <= 2.0)
    return {
        "plan_targets": len(ratios),
        "plan_within_2x": within,
        "plan_median_ratio": round(ratios[len(ratios) // 2], 2) if ratios else None,
        "plan_worst_ratio": round(ratios[-1], 2) if ratios else None,
        "plan_run_predicted_s": round(float(predicted["predictedMs"]) / 1000, 2),  # type: ignore[arg-type]
        # the run from its first claim to its last target's end (the command's own start,
        # discovery and control setup left out: plan prices the targets' work)
        "plan_run_actual_s": round(float(span[0]), 2) if span and span[0] is not None else None,
        "command_s": round(took, 2),
    }


def targets_toml(folder: Path, body: str, parallel: int, migrations: str = "set") -> Path:
    path = folder / "fleet.toml"
    path.write_text(
        f'migrations = "{migrations}"\n{body}[[waves]]\nname = "all"\nparallel = {parallel}\n'
    )
    return path


def alembic_loop(project: Path, dsns: list[str]) -> float:
    """What a user writes today for an Alembic set: `alembic upgrade head` once per target,
    the project's alembic.ini pointed at each in turn."""
    from queueguard.sets.alembic_config import ini_value
    from queueguard.sets.alembic_dsn import sqlalchemy_url

    alembic = str(Path(QUEUEGUARD).with_name("alembic"))
    began = time.perf_counter()
    for dsn in dsns:
        alembic_app.set_url(project, ini_value(sqlalchemy_url(dsn)).replace("%%", "%"))
        subprocess.run([alembic, "upgrade", "head"], cwd=project, check=True,
                       capture_output=True)  # fmt: skip
    return time.perf_counter() - began


def run_alembic(admin: str, n: int, revisions: int, root: Path, control: str) -> dict[str, float]:
    """An Alembic project whose env.py imports its application, on n databases: the loop
    and `fleet upgrade` with every revision pending, then both again at head."""
    project = root / "alembic"
    project.mkdir()
    alembic_app.write(project, revisions, url="postgresql+psycopg://placeholder/none")
    found: dict[str, float] = {}
    for case in ("loop", "fleet"):
        tag = f"a{case[0]}{os.getpid() % 1000}"
        drop(admin, tag)
        log(f"alembic: building {n} databases for {case}")
        with psycopg.connect(admin, autocommit=True) as conn:
            names = [f"qgbf{tag}_{i:04d}" for i in range(n)]
            for name in names:
                conn.execute(f'CREATE DATABASE "{name}"')
        dsns = [with_params(admin, dbname=x) for x in names]
        if case == "loop":
            found["alembic_loop_s"] = round(alembic_loop(project, dsns), 2)
            found["alembic_loop_at_head_s"] = round(alembic_loop(project, dsns), 2)
        else:
            body = f"[[discover]]\ndsn = \"{admin}\"\ndatabases = 'qgbf{tag}\\_%'\n"
            path = targets_toml(root, body, 8, migrations="alembic")
            took, _ = fleet(path, control)
            found["alembic_fleet_s"] = round(took, 2)
            took, _ = fleet(path, control)
            found["alembic_fleet_at_head_s"] = round(took, 2)
        log(f"alembic: {case}: {found}")
        drop(admin, tag)
    return found


def run(
    databases: int, schemas: int, parallel: int, alembic_databases: int, alembic_revisions: int
) -> dict[str, object]:
    admin = scratch.server_dsn()
    host = params(admin)
    log(f"server {host.get('host')}:{host.get('port')}")
    results: dict[str, object] = {}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        write_set(root / "set")
        with scratch.ScratchDatabases(admin, prefix="qgbfctl") as ctl:
            for kind in ("databases", "schemas"):
                for case in ("loop", "fleet"):
                    tag = f"{kind[0]}{case[0]}{os.getpid() % 1000}"
                    drop(admin, tag)
                    log(f"{kind}: building the fleet for {case}")
                    if kind == "databases":
                        names = make_databases(admin, tag, databases)
                        seed_databases(admin, names)
                        targets: list[tuple[str, str | None]] = [
                            (with_params(admin, dbname=n), None) for n in names
                        ]
                        body = (f"[[discover]]\ndsn = \"{admin}\"\n"
                                f"databases = 'qgbf{tag}\\_%'\n")  # fmt: skip
                    else:
                        dsn, found = make_schemas(admin, tag, schemas)
                        targets = [(dsn, s) for s in found]
                        body = f"[[discover]]\ndsn = \"{dsn}\"\nschemas = 'tenant\\_%'\n"
                    ledger_at_0001(targets)
                    if case == "loop":
                        took = psql_loop(targets, root / "set")
                        log(f"{kind}: psql loop {took:.1f} s")
                        results[f"{kind}_loop_s"] = round(took, 2)
                    else:
                        control = ctl.create()
                        path = targets_toml(root, body, parallel)
                        began = time.perf_counter()
                        predicted = plan(path)
                        results[f"{kind}_plan_took_s"] = round(time.perf_counter() - began, 2)
                        took, codes = fleet(path, control)
                        log(f"{kind}: fleet upgrade {took:.1f} s (exit {codes})")
                        compared = compare(predicted, control, took)
                        results.update({f"{kind}_{k}": v for k, v in compared.items()})
                        results[f"{kind}_fleet_s"] = round(took, 2)
                        results[f"{kind}_fleet_exit"] = codes
                        took, codes = fleet(path, control)
                        log(f"{kind}: fleet upgrade at head {took:.1f} s (exit {codes})")
                        results[f"{kind}_at_head_s"] = round(took, 2)
                    drop(admin, tag)
            results.update(
                run_alembic(admin, alembic_databases, alembic_revisions, root, ctl.create())
            )
            for n in (1, 2, 3):
                tag = f"r{n}{os.getpid() % 1000}"
                drop(admin, tag)
                log(f"runners: {n}, building the fleet")
                names = make_databases(admin, tag, databases)
                seed_databases(admin, names)
                ledger_at_0001([(with_params(admin, dbname=x), None) for x in names])
                control = ctl.create()
                body = f"[[discover]]\ndsn = \"{admin}\"\ndatabases = 'qgbf{tag}\\_%'\n"
                path = targets_toml(root, body, parallel)
                took, codes = fleet(path, control, runners=n)
                log(f"runners: {n}: {took:.1f} s (exit {codes})")
                results[f"runners_{n}_s"] = round(took, 2)
                drop(admin, tag)
    return results


def section(r: dict[str, object], args: argparse.Namespace, load: str) -> str:
    databases, schemas, parallel = args.databases, args.schemas, args.parallel

    def ratio(a: str, b: str) -> str:
        return f"{float(r[a]) / float(r[b]):.2f}×"  # type: ignore[arg-type]

    command = shown("bench.fleet", "--databases", str(databases), "--schemas", str(schemas),
                    "--alembic-databases", str(args.alembic_databases))  # fmt: skip
    table = "\n".join(
        [
            "| fleet | psql loop (floor) | `fleet upgrade` | vs the loop | again, all at head |",
            "|---|---|---|---|---|",
            *(
                f"| {size} {kind} | {r[f'{kind}_loop_s']} s | {r[f'{kind}_fleet_s']} s | "
                f"{ratio(f'{kind}_loop_s', f'{kind}_fleet_s')} faster | "
                f"{r[f'{kind}_at_head_s']} s |"
                for size, kind in ((databases, "databases"), (schemas, "schemas"))
            ),
        ]
    )
    plan_table = "\n".join(
        [
            "| fleet | `fleet plan` took | targets within 2× | median ratio | worst | "
            "whole run predicted | whole run actual |",
            "|---|---|---|---|---|---|---|",
            *(
                f"| {size} {kind} | {r[f'{kind}_plan_took_s']} s | "
                f"{r[f'{kind}_plan_within_2x']} of {r[f'{kind}_plan_targets']} | "
                f"{r[f'{kind}_plan_median_ratio']} | {r[f'{kind}_plan_worst_ratio']} | "
                f"{r[f'{kind}_plan_run_predicted_s']} s | {r[f'{kind}_plan_run_actual_s']} s |"
                for size, kind in ((databases, "databases"), (schemas, "schemas"))
            ),
        ]
    )
    return f"""{SECTION}

`{command}` — on the embedded server ({platform.machine()}, 2 cores), a plain SQL directory set
of six revisions (a table, a column, `CREATE INDEX CONCURRENTLY`, a foreign key to a shared
`public.tenants`, a backfill `UPDATE`, a `NOT NULL`), the first already applied by the setup
and every other pending, on {databases} databases and on {schemas} schemas in one database;
each target's table holds 100 to 10,000 rows (a 100× spread). The floor a user can write is a
sequential loop of `psql -v ON_ERROR_STOP=1 -f FILE` per file per target (no bookkeeping, no
timeouts, no lock ladder); `fleet upgrade` runs one wave of `parallel = {parallel}` (the lock
ladder, the runner lock and the ledger per revision, claims and leases in a control
database). Each case builds its fleet anew. Load average during the run: {load}.

{table}

`fleet plan` before each fleet's run (one group: one trace and its timed copies, on the
largest target), against the run — per target, the control database's time for it; the
whole run from its first claim to its last target's end:

{plan_table}

An Alembic project whose env.py imports its application (`bench/common/alembic_app.py`:
ORM models and about a second of library imports) with {args.alembic_revisions} revisions,
on {args.alembic_databases} databases: the loop a user writes today, `alembic upgrade head`
once per database, {r["alembic_loop_s"]} s with every revision pending and
{r["alembic_loop_at_head_s"]} s with every database at head; `fleet upgrade` (Alembic targets
in worker processes, one per runner worker, each importing the application once)
{r["alembic_fleet_s"]} s
({ratio("alembic_loop_s", "alembic_fleet_s")} faster) and {r["alembic_fleet_at_head_s"]} s
({ratio("alembic_loop_at_head_s", "alembic_fleet_at_head_s")} faster: each database's ledger
read directly, no process per target).

Runners sharing one control database, {databases} databases with the same pending work, one
wave of `parallel = {parallel}`: 1 runner {r["runners_1_s"]} s, 2 runners {r["runners_2_s"]} s
({ratio("runners_1_s", "runners_2_s")}), 3 runners {r["runners_3_s"]} s
({ratio("runners_1_s", "runners_3_s")}). The wave's cap counts every runner's claims, and the
server has 2 cores: past one runner the cap and the cores bind, not the runners.
"""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.fleet", description=__doc__)
    parser.add_argument("--databases", type=int, default=200)
    parser.add_argument("--schemas", type=int, default=1000)
    parser.add_argument("--parallel", type=int, default=8)
    parser.add_argument("--alembic-databases", type=int, default=50)
    parser.add_argument("--alembic-revisions", type=int, default=8)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--no-docs", action="store_true")
    args = parser.parse_args(argv)
    before = os.getloadavg()[0]
    results = run(
        args.databases, args.schemas, args.parallel, args.alembic_databases, args.alembic_revisions
    )
    load = f"{before:.1f} at the start, {os.getloadavg()[0]:.1f} at the end (1 min)"
    if args.json:
        print(json.dumps(results, indent=2))
    text = section(results, args, load)
    print(text)
    if not args.no_docs:
        replace_section(DOCS, text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
