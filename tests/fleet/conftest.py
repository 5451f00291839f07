"""A fleet on the test server: databases and schema-per-tenant databases under a prefix of
the test's own (so discovery finds them and nothing else), a small SQL-directory set, a
control database of the test's own, and the CLI run in-process or as runner processes."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
import pytest

from queueguard.cli import main
from queueguard.pg import scratch
from queueguard.pg.dsn import with_params

#: a set of three revisions: a table, a column with an index, a NOT NULL column with a default
SET = {
    "0001_items.sql": "CREATE TABLE items (id bigint PRIMARY KEY, note text);\n",
    "0002_owner.sql": (
        "ALTER TABLE items ADD COLUMN owner_id bigint;\n"
        "CREATE INDEX items_owner_idx ON items (owner_id);\n"
    ),
    "0003_flag.sql": "ALTER TABLE items ADD COLUMN flag boolean NOT NULL DEFAULT false;\n",
}


@dataclass
class Fleet:
    admin: str
    root: Path
    prefix: str
    databases: scratch.ScratchDatabases
    control: str = ""
    created: list[str] = field(default_factory=list)

    @property
    def set_dir(self) -> Path:
        return self.root / "set"

    def write_set(self, files: dict[str, str] | None = None) -> Path:
        self.set_dir.mkdir(exist_ok=True)
        for old in self.set_dir.glob("*.sql"):
            old.unlink()
        for name, text in (files or SET).items():
            (self.set_dir / name).write_text(text)
        return self.set_dir

    def database(self, suffix: str) -> str:
        """A database named <prefix>_<suffix> (so `databases = '<prefix>\\_%'` finds it)."""
        name = f"{self.prefix}_{suffix}"
        with psycopg.connect(self.admin, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        self.created.append(name)
        return with_params(self.admin, dbname=name)

    def schemas(self, suffix: str, names: list[str]) -> str:
        dsn = self.database(suffix)
        with psycopg.connect(dsn, autocommit=True) as conn:
            for n in names:
                conn.execute(f'CREATE SCHEMA "{n}"')
        return dsn

    def targets_file(self, body: str, name: str = "fleet.toml") -> Path:
        path = self.root / name
        path.write_text(f'migrations = "set"\n{body}')
        return path

    def discover_databases(self, extra: str = "", like: str = "%") -> str:
        """A [[discover]] of this fleet's databases whose suffix is LIKE `like`."""
        pattern = f"{self.prefix}\\_{like}"
        return f"[[discover]]\ndsn = \"{self.admin}\"\ndatabases = '{pattern}'\n{extra}"

    def sql(self, dsn: str, query: str) -> list[tuple[Any, ...]]:
        with psycopg.connect(dsn, autocommit=True) as conn:
            cur = conn.execute(query)
            return cur.fetchall() if cur.description else []

    def dsn(self, suffix: str) -> str:
        return with_params(self.admin, dbname=f"{self.prefix}_{suffix}")

    def cli(self, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
        control = ["--control", self.control] if args[0] in ("upgrade", "status") else []
        code = main(["fleet", *args, *control])
        out, err = capsys.readouterr()
        return code, out, err

    def runner(self, *args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
        """`queueguard fleet upgrade` as a runner process of its own."""
        command = [sys.executable, "-m", "queueguard.cli", "fleet", "upgrade", "--control",
                   self.control, *args]  # fmt: skip
        return subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env={**os.environ, **(env or {})},
        )  # fmt: skip

    def board(self) -> dict[str, tuple[Any, ...]]:
        """Each target's (state, revision, fence, error) in the newest run."""
        rows = self.sql(
            self.control,
            "SELECT name, state, revision, fence, error FROM queueguard_fleet.targets "
            "WHERE run_id = (SELECT max(id) FROM queueguard_fleet.runs)",
        )
        return {r[0]: r[1:] for r in rows}


@pytest.fixture
def fleet(pg_admin_dsn: str, tmp_path: Path) -> Iterator[Fleet]:
    prefix = f"qgfl{uuid.uuid4().hex[:6]}"
    with scratch.ScratchDatabases(pg_admin_dsn, prefix="qgflctl") as dbs:
        made = Fleet(pg_admin_dsn, tmp_path, prefix, dbs)
        made.control = dbs.create()
        made.write_set()
        try:
            yield made
        finally:
            for name in made.created:
                scratch.drop_database(pg_admin_dsn, name)


def ledger(dsn: str, schema: str = "public") -> list[str]:
    with psycopg.connect(dsn) as conn:
        found = conn.execute("SELECT to_regclass(%s)", (f'"{schema}".queueguard_sqldir_ledger',))
        if found.fetchone() == (None,):
            return []
        rows = conn.execute(
            f'SELECT revision FROM "{schema}".queueguard_sqldir_ledger ORDER BY revision'
        ).fetchall()
    return [r[0] for r in rows]
