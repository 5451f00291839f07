"""Any Alembic project as a migration set: its revisions read by Alembic's own ScriptDirectory,
applied one at a time through the project's own env.py, every statement they send hooked.

Only a single line of revisions is read: a set with several heads or a merge point is refused
(branches are out of scope, since "the revision before this one" has no single answer there).

The version table is the project's choice (`context.configure(version_table=…)` in env.py),
so it is learnt by running env.py the way `alembic current` does: under an
`EnvironmentContext` whose work function returns no steps, here in offline mode (no database
needed, nothing rendered), then read from the MigrationContext env.py configured. No SQL is
parsed and nothing of Alembic's is patched; an env.py that cannot run offline is run online,
read-only, when a DSN is at hand.

This module is the adapter (`detect`, `load`, `current`, `run`, `render`); its parts live
beside it: `alembic_config` (the script directory, alembic.ini and Alembic's Config),
`alembic_dsn` (a DSN as a SQLAlchemy URL and connection), `alembic_env` (one env.py at a
time in this process), `alembic_version_table` (which table, and which statements are
bookkeeping on it), `alembic_run` (one env.py run to a target, a hook per revision),
`alembic_tap` (every statement a running revision sends, at the driver) and `alembic_hooks`
(before/after hooks, and the refusal of another database).
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from alembic.runtime.migration import MigrationContext
from alembic.script import Script, ScriptDirectory
from alembic.util import CommandError

from queueguard.errors import UsageError
from queueguard.pg.dsn import redact
from queueguard.sets.alembic_config import (
    INI,
    _ini_script_location,
    _is_script_dir,
    _script_directory,
    config,
)
from queueguard.sets.alembic_dsn import READ_ONLY, _connected
from queueguard.sets.alembic_hooks import After, Before, around_of
from queueguard.sets.alembic_render import NotRendered, Rendered, rendered
from queueguard.sets.alembic_run import Hooks, Outcome
from queueguard.sets.alembic_run import upgrade as upgrade_to
from queueguard.sets.alembic_version_table import (
    DEFAULT_VERSION_TABLE,
    VersionTable,
    version_table,
)
from queueguard.sets.model import MigrationSet, Revision

__all__ = [
    "DEFAULT_VERSION_TABLE",
    "FORMAT",
    "Hooks",
    "NotRendered",
    "Outcome",
    "Rendered",
    "current",
    "detect",
    "load",
    "render",
    "rendered",
    "run",
    "upgrade_to",
]

FORMAT = "alembic"


# --- detection ---------------------------------------------------------------------------


def detect(root: Path) -> bool:
    """Whether `root` is an Alembic script directory (env.py beside versions/ or
    script.py.mako), or the folder of an alembic.ini whose script_location names one.
    (queueguard's own migrations/ is one too: callers try the native format first.)"""
    if not root.is_dir():
        return False
    if _is_script_dir(root):
        return True
    ini = root / INI
    if not ini.is_file():
        return False
    location = _ini_script_location(ini)
    return location is not None and _is_script_dir(location)


# --- reading the set ---------------------------------------------------------------------


def _line(script: ScriptDirectory, where: Path) -> list[Script]:
    """The revisions base → head, refusing anything but one line."""
    try:
        heads = script.get_heads()
        if len(heads) > 1:
            raise UsageError(
                f"{where}: one line of revisions expected, found {len(heads)} heads "
                f"({', '.join(sorted(heads))}); Alembic branches are not supported"
            )
        revisions = list(reversed(list(script.walk_revisions())))
    except CommandError as exc:
        raise UsageError(f"{where}: {exc}") from None
    merges = [r.revision for r in revisions if r.is_merge_point]
    if merges:
        raise UsageError(
            f"{where}: one line of revisions expected, {', '.join(merges)} merges branches; "
            "Alembic branches are not supported"
        )
    return revisions


def _revision(script: Script) -> Revision:
    path = Path(script.path)
    down = script.down_revision
    assert down is None or isinstance(down, str)  # a merge point was refused by _line
    return Revision(
        id=script.revision,
        down=down,
        title=(script.doc or "").strip(),
        files=(path,),
        checksum=hashlib.sha256(path.read_bytes()).hexdigest(),
        statements=None,  # Python: its statements are only known by running it
    )


def load(root: Path, dsn: str | None = None) -> MigrationSet:
    """The project's revisions, base → head, and its version table as bookkeeping (env.py is
    run in offline mode to learn it, or online on `dsn`, read only, when it cannot run
    offline: see `version_table`)."""
    cfg = config(root, None)
    script = _script_directory(cfg)
    revisions = tuple(_revision(s) for s in _line(script, root))
    table = version_table(root, dsn)
    return MigrationSet(
        format=FORMAT,
        root=root,
        revisions=revisions,
        bookkeeping=frozenset({table.qualified}),
        version_table=table.qualified,
    )


# --- the database ------------------------------------------------------------------------


def current(dsn: str, table: str = DEFAULT_VERSION_TABLE) -> str | None:
    """The revision the database is at (None: an empty database or no version table), read by
    Alembic's own MigrationContext on the project's version table (`load(...).bookkeeping`,
    `schema.table` when qualified), on a read-only connection; no env.py is run."""
    version = VersionTable.parse(table)
    with _connected(dsn, READ_ONLY) as connection:
        context = MigrationContext.configure(
            connection,
            opts={"version_table": version.name, "version_table_schema": version.schema},
        )
        try:
            return context.get_current_revision()
        except CommandError as exc:  # several rows: a branched database
            raise UsageError(f"{redact(dsn)}: {exc}; Alembic branches are not supported") from None
        finally:
            connection.rollback()


def run(
    root: Path,
    dsn: str,
    revision_id: str,
    *,
    before: Before | None = None,
    after: After | None = None,
    options: str | None = None,
    mset: MigrationSet | None = None,
) -> Outcome:
    """Apply exactly one revision (the database must be at its down revision) through the
    project's env.py, calling `before(dbapi_connection, sql)` and `after(dbapi_connection,
    sql, seconds, error)` around every statement sent (caught at the driver), Alembic's
    own included (tell them apart with `is_bookkeeping(sql, table)`). The connection given
    to the hooks is psycopg's: a hook may query on it, in the statement's transaction
    (after a failed statement that transaction is aborted). `options`: see
    `alembic_run.upgrade`, which runs any number of revisions in one env.py run."""
    migrations = mset or load(root)
    revision = migrations.get(revision_id)
    at = current(dsn, migrations.version_table or DEFAULT_VERSION_TABLE)
    if at != revision.down:
        raise UsageError(
            f"{revision.id} applies after {revision.down or 'an empty database'}, "
            f"but the database is at {at or 'no revision'}"
        )
    hooks = Hooks(around=around_of(before, after) if before or after else None)
    return upgrade_to(migrations, dsn, revision.id, hooks=hooks, options=options)


def render(root: Path, revision_id: str) -> str | None:
    """One revision's SQL as `alembic upgrade DOWN:REV --sql` renders it (offline: no
    database), Alembic's own bookkeeping and transaction control left out; None when the
    revision cannot be rendered offline (a data migration that reads rows)."""
    migrations = load(root)
    found = rendered(migrations, migrations.get(revision_id))
    if isinstance(found, NotRendered):
        return None
    return "".join(f"{s};\n" for s in found.statements)
