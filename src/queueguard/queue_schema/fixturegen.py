"""The only writer of the golden fixtures: `python -m queueguard.queue_schema.fixturegen --write`.

For each released version it builds the database as users have it — the released revision's
schema from the migration set, plus data that exercises every case the upgrade must handle —
dumps it with pg_dump (normalised so it loads on any supported major), records a manifest
with the schema fingerprint, upgrades a clone to head and freezes the normalised state as the
golden expectation. It also writes the memory snapshots (legacy and v3). Regenerating is a
deliberate act: without `--write` it regenerates into a temporary folder and prints a diff.
"""

from __future__ import annotations

import argparse
import difflib
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

from queueguard import revisions, snapshot
from queueguard.engine import catalog
from queueguard.engine.dumps import normalise_dump
from queueguard.pg import scratch, tools
from queueguard.pg.connect import connection
from queueguard.queue_schema import golden, rows, state
from queueguard.queue_schema.fixture_data import FIXTURES, USER_DATA, spool_rows
from queueguard.queue_schema.runner import upgrade
from queueguard.resources import fixtures_dir
from queueguard.revisions import SetFacts
from queueguard.snapshot import relocation


# building and dumping --------------------------------------------------------------------
def pg_dump(dsn: str) -> str:
    flags = ["--no-owner", "--no-privileges", "--inserts", "--quote-all-identifiers"]
    dumped = tools.run("pg_dump", dsn, flags)
    if dumped.returncode != 0:
        raise SystemExit(f"pg_dump failed: {dumped.stderr.decode(errors='replace')[-500:]}")
    return normalise_dump(dumped.stdout.decode())


def build(name: str, admin: str, out_dir: Path, migrations: SetFacts | None = None) -> None:
    spec = FIXTURES[name]
    folder = out_dir / name
    folder.mkdir(parents=True, exist_ok=True)
    with scratch.ScratchDatabases(admin, prefix="qg_gen") as databases:
        dsn = databases.create()
        upgrade(dsn, to=spec["revision"], progress=False, migrations=migrations)
        with connection(dsn) as conn:
            schema_fp = catalog.fingerprint(conn)
            for stmt in spec["data"]():
                conn.execute(stmt)  # no parameters: psycopg leaves `%` alone
            conn.commit()
        (folder / "database.sql").write_text(pg_dump(dsn))
        before = None
        if spec["revision"] == "003":
            with connection(dsn) as conn:
                before = state.export_database(conn, format_version=3)
            (out_dir / "snapshots").mkdir(exist_ok=True)
            _write_json(out_dir / "snapshots" / "v3_golden.json", before)
        with connection(dsn) as conn:
            since = rows.clock(conn)
        upgrade(dsn, progress=False, migrations=migrations)
        with connection(dsn) as conn:
            after = state.export_database(conn)
            whole = rows.export_upgraded(conn, since, migrations or revisions.packaged())
        if before is not None and relocation.apply_004(before) != after:
            raise SystemExit("memory and SQL upgrades disagree on v0.3; fix before freezing")
        _write_json(folder / "expected_head.json", after)
        _write_json(folder / golden.EXPECTED_ROWS, whole)
        _write_json(
            folder / "manifest.json",
            {
                "name": name,
                "revision": spec["revision"],
                "schema_sha256": schema_fp,
                "generator": "python -m queueguard.queue_schema.fixturegen --write",
                "exercises": spec["exercises"],
            },
        )


def legacy_snapshots(out_dir: Path) -> None:
    """Pre-003 exports (deliveryId based), as v0.1/v0.2 tooling wrote them."""
    folder = out_dir / "snapshots"
    folder.mkdir(exist_ok=True)
    tasks = [
        {
            "deliveryId": i,
            "namespace": ns,
            "taskQueue": tq,
            "taskType": t,
            "partition": p,
            "version": v,
            "data": payload,
        }
        for i, (ns, tq, t, p, v, payload, _) in enumerate(spool_rows(), start=1)
    ]
    _write_json(folder / "legacy_v1.json", {"tasks": tasks})
    _write_json(
        folder / "legacy_v2.json",
        {
            "formatVersion": 2,
            "tasks": tasks,
            "userData": [
                {"namespace": ns, "taskQueue": tq, "version": v, "data": d}
                for ns, tq, v, d in USER_DATA
            ],
        },
    )
    v3 = json.loads((folder / "v3_golden.json").read_text())
    v3["queues"][-1]["tasks"].append({"taskId": 99, "deliveryId": 99, "data": {"task": {}}})
    _write_json(folder / "legacy_record_in_v3.json", v3)
    snapshot.upgrade_document(json.loads((folder / "v3_golden.json").read_text()))


def _write_json(path: Path, doc: Any) -> None:
    path.write_text(json.dumps(doc, indent=2, ensure_ascii=False, sort_keys=True) + "\n")


def head_catalog(admin: str, out_dir: Path, migrations: SetFacts | None = None) -> None:
    """Freeze the head schema's catalog (verify compares every upgrade with it)."""
    with scratch.ScratchDatabases(admin, prefix="qg_gen") as databases:
        dsn = databases.create()
        upgrade(dsn, progress=False, migrations=migrations)
        _write_json(out_dir / golden.HEAD_CATALOG, catalog.document(catalog.introspect(dsn)))


def generate(out_dir: Path, migrations: SetFacts | None = None) -> None:
    admin = scratch.server_dsn("embedded")
    for name in FIXTURES:
        build(name, admin, out_dir, migrations)
    head_catalog(admin, out_dir, migrations)
    legacy_snapshots(out_dir)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--write", action="store_true", help="overwrite the frozen fixtures")
    parser.add_argument("--fixtures", type=Path, default=fixtures_dir())
    parser.add_argument(
        "--migrations", type=Path, help="the migration set (default: the packaged one)"
    )
    args = parser.parse_args(argv)
    migrations = revisions.load(args.migrations) if args.migrations else None
    if args.write:
        generate(args.fixtures, migrations)
        print(f"fixtures written to {args.fixtures}")
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        generate(Path(tmp), migrations)
        changed = 0
        for new in sorted(Path(tmp).rglob("*")):
            if new.is_dir():
                continue
            rel = new.relative_to(tmp)
            old = args.fixtures / rel
            old_text = old.read_text().splitlines() if old.exists() else []
            diff = list(
                difflib.unified_diff(
                    old_text,
                    new.read_text().splitlines(),
                    f"frozen/{rel}",
                    f"regenerated/{rel}",
                    lineterm="",
                )
            )
            changed += bool(diff)
            sys.stdout.write("\n".join(diff[:200]) + ("\n" if diff else ""))
        print(f"{changed} file(s) differ from the frozen fixtures")
        return 1 if changed else 0


if __name__ == "__main__":
    raise SystemExit(main())
