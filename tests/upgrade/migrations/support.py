"""Helpers shared by the migration tests: running the upgrade, reading a database."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql

from queueguard.engine import catalog
from queueguard.queue_schema.runner import upgrade

ROOT = Path(__file__).resolve().parents[3]
BIN = Path(sys.executable).parent
QUEUEGUARD = str(BIN / "queueguard")
ALEMBIC = str(BIN / "alembic")
UNVERSIONED = {"behavior": "unversioned", "deploymentVersion": None}
ALL = ["001", "002", "003", "004"]

MakeDb = Callable[..., str]


def up(dsn: str, to: str = "head", **kwargs: Any) -> Any:
    return upgrade(dsn, to=to, progress=False, **kwargs)


def execute(dsn: str, statement: str, params: Any = None) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(statement, params)


def rows(dsn: str, statement: str, params: Any = None) -> list[tuple[Any, ...]]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        return list(conn.execute(statement, params).fetchall())


def revision(dsn: str) -> str | None:
    found = rows(dsn, "SELECT version_num FROM queueguard_version")
    return found[0][0] if found else None


def protocol(dsn: str) -> list[tuple[int, int]]:
    return [(a, b) for a, b in rows(dsn, "SELECT min_protocol, max_protocol FROM runtime_protocol")]


def raw_dump(dsn: str) -> dict[str, list[str]]:
    """Every row of every table with its physical identity (ctid, xmin): any rewrite shows."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        tables = [
            r[0]
            for r in conn.execute(
                "SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY 1"
            )
        ]
        return {
            t: sorted(
                str(r)
                for r in conn.execute(
                    sql.SQL("SELECT ctid::text, xmin::text, x::text FROM {} x").format(
                        sql.Identifier(t)
                    )
                )
            )
            for t in tables
        }


def digest(dsn: str, table: str) -> str:
    found = rows(
        dsn,
        f"SELECT md5(coalesce(string_agg(x::text, E'\\n' ORDER BY x::text), '')) FROM {table} x",
    )
    return str(found[0][0])


def assert_same_catalog(a: catalog.Catalog, b: catalog.Catalog, what: str) -> None:
    differences = catalog.diff(a, b)
    assert not differences, f"{what}:\n" + "\n".join(differences)


def run_cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [QUEUEGUARD, *args], capture_output=True, text=True, timeout=timeout, cwd=ROOT
    )
