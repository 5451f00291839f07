"""Data checks for sets of other formats (verify's `--fixtures`/`--invariants`, and rehearse's):
load a database frozen at an older revision into a scratch database, read where its bookkeeping
says it is, and run read-only invariant queries on it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import psycopg

from queueguard.engine.plan.apply import first_line
from queueguard.engine.plan.planner import current_revision
from queueguard.engine.verify.report import FixtureFile
from queueguard.pg import tools
from queueguard.pg.connect import connection
from queueguard.pg.sqlfiles import queries
from queueguard.sets import MigrationSet, temporal

Q = queries("queueguard.engine.verify", "data.sql")
APPLICATION_NAME = "queueguard-verify"


class LoadFailed(Exception):
    """A fixture psql or pg_restore could not load; the message is the tool's first error."""


def _tool_error(output: bytes) -> str:
    lines = [line for line in output.decode(errors="replace").splitlines() if line.strip()]
    errors = [line for line in lines if "ERROR" in line or "error" in line]
    return (errors or lines or ["no output"])[0].strip()


def load_file(path: Path, dsn: str) -> None:
    """Load a psql script (stopping at its first error) or, for a `.dump`, a `pg_dump -Fc`
    archive with pg_restore (without its owners) into the database at `dsn`."""
    if path.suffix != ".dump":
        done = tools.run("psql", dsn, ["-v", "ON_ERROR_STOP=1", "-q", "-f", str(path)])
    else:
        done = tools.run("pg_restore", dsn, ["--no-owner", "--exit-on-error", str(path)])
    if done.returncode != 0:
        program = "psql" if path.suffix != ".dump" else "pg_restore"
        raise LoadFailed(f"{program} failed on {path.name}: {_tool_error(done.stderr)}")


def load_fixture(fixture: FixtureFile, dsn: str) -> None:
    """Load a fixture (`.sql` with psql, `.dump` with pg_restore) into the empty database."""
    load_file(fixture.path, dsn)


def adopt(mset: MigrationSet, dsn: str) -> str | None:
    """Make a restored copy's bookkeeping read as the original's. Temporal keys its version
    row on the database's name (the tool's `--db`), which a copy under another name does not
    share: a copy holding the rows of exactly one other database is read as that one (its
    rows are renamed to the copy's). A note saying so, or None."""
    if mset.format != "temporal":
        return None
    with connection(dsn, application_name=APPLICATION_NAME) as conn:
        exists = conn.execute(Q["temporal_version_exists"]).fetchone()
        if not exists or not exists[0]:
            return None
        names = [r[0] for r in conn.execute(Q["temporal_db_names"]).fetchall()]
        if len(names) != 1 or names[0] == conn.info.dbname:
            return None
        temporal.take_over_version(conn, names[0])
        conn.commit()
    return f"schema_version was kept for database {names[0]!r}: read as this copy's"


def at_revision(mset: MigrationSet, dsn: str) -> str | None:
    """The revision the database is at by the format's own bookkeeping (read only)."""
    return current_revision(mset, dsn)


def invariant_rows(dsn: str, invariants: dict[str, str]) -> dict[str, list[tuple[Any, ...]] | str]:
    """Each invariant's rows, every query in a READ ONLY transaction of its own; an error is
    kept as its first line (the query could not run on this database)."""
    found: dict[str, list[tuple[Any, ...]] | str] = {}
    with connection(dsn, application_name=APPLICATION_NAME) as conn:
        for name, query in invariants.items():
            try:
                conn.execute("SET TRANSACTION READ ONLY")
                found[name] = [tuple(row) for row in conn.execute(query).fetchall()]
            except psycopg.Error as exc:
                found[name] = first_line(exc)
            finally:
                conn.rollback()
    return found
