"""The version table of an Alembic project: which one its env.py configures (learnt by
running env.py, see `version_table`), and whether a statement is Alembic's own bookkeeping on
it (`is_bookkeeping`)."""

from __future__ import annotations

import io
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from alembic.config import Config
from alembic.runtime.environment import EnvironmentContext
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory

from queueguard.errors import QueueguardError, UsageError
from queueguard.sets.alembic_config import _script_directory, config
from queueguard.sets.alembic_dsn import READ_ONLY, _connected, with_options
from queueguard.sets.alembic_env import _alembic_running
from queueguard.sets.model import state_of
from queueguard.sets.project_code import said

DEFAULT_VERSION_TABLE = "alembic_version"


@dataclass(frozen=True)
class VersionTable:
    name: str = DEFAULT_VERSION_TABLE
    schema: str | None = None

    @property
    def qualified(self) -> str:
        return f"{self.schema}.{self.name}" if self.schema else self.name

    @classmethod
    def parse(cls, qualified: str) -> VersionTable:
        schema, _, name = qualified.rpartition(".")
        return cls(name, schema or None)


def _configured_table(cfg: Config, script: ScriptDirectory, *, as_sql: bool) -> VersionTable:
    """Run env.py as `alembic current` does, with a work function that returns no steps,
    and read the version table from the MigrationContext it configured."""
    buffer = io.StringIO()
    cfg.output_buffer = buffer  # offline: the "BEGIN;"/"COMMIT;" env.py prints go here

    def no_steps(_heads: Any, _context: MigrationContext) -> list[Any]:
        return []

    with (
        _alembic_running(),
        EnvironmentContext(
            cfg, script, fn=no_steps, as_sql=as_sql, dont_mutate=True, output_buffer=buffer
        ) as env,
    ):
        script.run_env()
        context = env.get_context()
        return VersionTable(context.version_table, context.version_table_schema)


def version_table(root: Path, dsn: str | None = None) -> VersionTable:
    """The table the project's env.py keeps its version in. Learnt offline (no database);
    an env.py that cannot run offline is run online on `dsn`, on a read-only connection,
    never creating the table (`dont_mutate`)."""
    cfg = config(root, None)
    script = _script_directory(cfg)
    try:
        return _configured_table(cfg, script, as_sql=True)
    except Exception as offline:
        if dsn is None:
            raise UsageError(
                f"{root}: cannot learn the version table, env.py failed in offline mode "
                f"({said(offline, root)}); give a database (--dsn) to learn it there, read only"
            ) from offline
    with _connected(dsn, READ_ONLY) as connection:
        cfg = config(root, with_options(dsn, READ_ONLY), connection=connection)
        try:
            return _configured_table(cfg, script, as_sql=False)
        except QueueguardError:
            raise
        except Exception as exc:  # the project's env.py
            raise UsageError(f"{root}: env.py failed: {said(exc, root)}") from exc
        finally:
            connection.rollback()


_NAME = r'(?:"(?:[^"]|"")+"|[\w$]+)'
#: the table a statement is about: what it creates, writes into or first reads from
_TARGET = re.compile(
    r"^\s*(?:CREATE\s+TABLE(?:\s+IF\s+NOT\s+EXISTS)?|INSERT\s+INTO|UPDATE(?:\s+ONLY)?"
    r"|DELETE\s+FROM(?:\s+ONLY)?|DROP\s+TABLE(?:\s+IF\s+EXISTS)?|SELECT\b.*?\bFROM)"
    rf"\s+(?P<name>{_NAME}(?:\s*\.\s*{_NAME})?)",
    re.IGNORECASE | re.DOTALL,
)
#: SQLAlchemy's reflection probe on PostgreSQL (has_table), which Alembic sends to see whether
#: the version table exists: the name travels as a parameter, and the WHERE clause's shape
#: changes between SQLAlchemy releases (`relname = …` in 2.0, `relname IN (…)` in 2.1), so the
#: fully qualified head of the query is what is matched; a hand-written query spells it so
#: only rarely
_HAS_TABLE = re.compile(
    r"^\s*SELECT\s+pg_catalog\.pg_class\.relname\s+FROM\s+pg_catalog\.pg_class\b",
    re.IGNORECASE,
)


def _ident(part: str) -> str:
    part = part.strip()
    return part[1:-1].replace('""', '"') if part.startswith('"') else part.lower()


def is_bookkeeping(sql: str, version_table: str = DEFAULT_VERSION_TABLE) -> bool:
    """Whether a statement is Alembic's own bookkeeping rather than the revision's (pure): it
    creates, reads or writes the version table (`schema.table` when qualified), or is the
    has_table probe Alembic sends before it. (A revision that calls has_table itself sends the
    same probe; it reads the catalog only.)"""
    if _HAS_TABLE.match(sql):
        return True
    found = _TARGET.match(sql)
    if found is None:
        return False
    parts = [_ident(p) for p in re.findall(_NAME, found["name"])]
    want = VersionTable.parse(version_table)
    if parts[-1] != want.name:
        return False
    return len(parts) == 1 or want.schema is None or parts[0] == want.schema


def read(conn: Any, table: str = DEFAULT_VERSION_TABLE) -> str | None:
    """The revision the version table holds, read on a psycopg connection in its transaction
    (None: no table, or no row); several rows (a database at several heads of a set that
    branches) are said as one state (`model.state_of`)."""
    version = VersionTable.parse(table)
    where = conn.execute("SELECT to_regclass(%s)", (_quoted(version),)).fetchone()
    if where is None or where[0] is None:
        return None
    rows = conn.execute(f"SELECT version_num FROM {_quoted(version)}").fetchall()
    return state_of(str(r[0]) for r in rows)


def record(conn: Any, table: str, bookkeeping: tuple[str, ...]) -> None:
    """Alembic's bookkeeping of one revision, as `alembic upgrade --sql` rendered it (the
    UPDATE of the version row; for a first revision the table's CREATE and the INSERT), in
    the caller's transaction. The CREATE is left out where the table exists already (a
    database taken back to base keeps it, empty), as Alembic itself checks online."""
    exists = conn.execute("SELECT to_regclass(%s)", (_quoted(VersionTable.parse(table)),))
    row = exists.fetchone()
    for statement in bookkeeping:
        if row is not None and row[0] is not None and _CREATE.match(statement):
            continue
        conn.execute(statement)


_CREATE = re.compile(r"^\s*CREATE\s+TABLE\b", re.IGNORECASE)


def _quoted(version: VersionTable) -> str:
    parts = (version.schema, version.name) if version.schema else (version.name,)
    return ".".join('"' + p.replace('"', '""') + '"' for p in parts)
