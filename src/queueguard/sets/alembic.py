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
"""

from __future__ import annotations

import hashlib
import io
import logging
import os
import re
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from alembic import command
from alembic.config import Config
from alembic.runtime.environment import EnvironmentContext
from alembic.runtime.migration import MigrationContext
from alembic.script import Script, ScriptDirectory
from alembic.util import CommandError, coerce_resource_to_filename
from psycopg import conninfo
from sqlalchemy import event
from sqlalchemy.pool import NullPool

from queueguard.errors import ConnectionFailed, MigrationError, UsageError
from queueguard.pg.connect import CONNECT_TIMEOUT_S
from queueguard.pg.connect import reason as driver_reason
from queueguard.pg.dsn import params, redact, validate, with_params
from queueguard.sets.model import MigrationSet, Revision

FORMAT = "alembic"
INI = "alembic.ini"
DEFAULT_VERSION_TABLE = "alembic_version"
#: libpq options of a connection that must not write (`current`, version-table discovery)
READ_ONLY = "-c default_transaction_read_only=on"
#: Alembic keeps the running migration context in module globals (`alembic.context`,
#: `alembic.op`), and the statement hooks listen on the Engine class: one env.py at a time
#: per process (upgrade.runner has its own lock for queueguard's set, a layer above).
_ALEMBIC = threading.Lock()

#: before(dbapi_connection, sql_text)
Before = Callable[[Any, str], None]
#: after(dbapi_connection, sql_text, seconds, error or None)
After = Callable[[Any, str, float, BaseException | None], None]


# --- detection and configuration ---------------------------------------------------------


def _is_script_dir(path: Path) -> bool:
    return (path / "env.py").is_file() and (
        (path / "versions").is_dir() or (path / "script.py.mako").is_file()
    )


def _ini_script_location(ini: Path) -> Path | None:
    """The script directory an alembic.ini names, resolved against the ini's folder (Alembic
    itself resolves a relative one against the working directory, which is only right when
    run from the project root, where `alembic` is normally run); None if it names none."""
    try:
        location = Config(file_=str(ini)).get_main_option("script_location")
    except Exception:  # a broken ini is "not an Alembic project", not a crash in detect
        return None
    if not location:
        return None
    # `package:folder` names a folder inside an installed package (Alembic's own spelling).
    if ":" in location and not os.path.isabs(location) and not Path(location).exists():
        try:
            return Path(coerce_resource_to_filename(location))
        except Exception:
            return None
    path = Path(location)
    return path if path.is_absolute() else ini.parent / path


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


def _locate(root: Path) -> tuple[Path, Path | None]:
    """(script directory, alembic.ini or None) of a project folder."""
    root = root.resolve()
    ini = root / INI
    if ini.is_file():
        location = _ini_script_location(ini)
        if location is None:
            raise UsageError(f"{ini} names no script_location")
        if not _is_script_dir(location):
            raise UsageError(f"{ini}: script_location {location} is not an Alembic folder")
        return location.resolve(), ini
    if not _is_script_dir(root):
        raise UsageError(f"{root} is not an Alembic project (no env.py and versions/)")
    parent_ini = root.parent / INI
    return root, parent_ini if parent_ini.is_file() else None


def _plain_host(host: str) -> bool:
    """A single TCP host name or address that fits a URL's host part (not a socket folder,
    not libpq's comma-separated list)."""
    return bool(host) and not host.startswith("/") and "," not in host and "@" not in host


def with_options(dsn: str, options: str | None) -> str:
    """`dsn` with libpq `options` added to its own (pure)."""
    if not options:
        return validate(dsn)
    own = params(dsn).get("options")
    return with_params(dsn, options=f"{own} {options}" if own else options)


def sqlalchemy_url(dsn: str, options: str | None = None) -> sa.URL:
    """A `postgresql+psycopg` URL for a libpq DSN in URL or key=value form (pure): libpq reads
    the DSN, and parameters a URL has no place for (a socket folder, several hosts, sslmode…)
    travel in the query, which SQLAlchemy's psycopg dialect hands to psycopg.connect. `options`
    (libpq's, e.g. `-c lock_timeout=5000`) is added to the DSN's own."""
    parsed = conninfo.conninfo_to_dict(with_options(dsn, options))
    found = {k: str(v) for k, v in parsed.items() if v}
    query = {k: v for k, v in found.items() if k not in {"user", "password", "dbname"}}
    query.setdefault("connect_timeout", str(CONNECT_TIMEOUT_S))
    host, port = found.get("host"), found.get("port")
    url_host: str | None = None
    url_port: int | None = None
    if host is not None and _plain_host(host):
        url_host = query.pop("host")
        if port is not None and port.isdigit():
            url_port = int(query.pop("port"))
    return sa.URL.create(
        "postgresql+psycopg",
        username=found.get("user"),
        password=found.get("password"),
        host=url_host,
        port=url_port,
        database=found.get("dbname"),
        query=query,
    )


def ini_value(url: sa.URL) -> str:
    """A URL as a value ConfigParser reads back unchanged: Alembic's Config interpolates `%`
    (`%(here)s`), and a password's `%` and `@` are already %-quoted by the URL."""
    return url.render_as_string(hide_password=False).replace("%", "%%")


def config(root: Path, dsn: str | None, **attributes: Any) -> Config:
    """An Alembic Config on the project at `root`: its own alembic.ini when it has one (so an
    env.py calling `fileConfig(config.config_file_name)` works), script_location made
    absolute, sqlalchemy.url the target (`postgresql+psycopg://`; a bare placeholder when
    `dsn` is None). `attributes` go to `config.attributes`, e.g. `connection=` a live
    SQLAlchemy Connection for an env.py that takes one (Alembic's cookbook recipe)."""
    script_dir, ini = _locate(root)
    # Alembic's own messages go to a buffer, not sys.stdout (as upgrade.alembic_config does).
    cfg = Config(file_=str(ini) if ini else None, stdout=io.StringIO())
    cfg.set_main_option("script_location", str(script_dir))
    if ini is not None:
        _anchor_sys_path(cfg, ini.parent)
    url = sqlalchemy_url(dsn) if dsn is not None else sa.URL.create("postgresql+psycopg")
    cfg.set_main_option("sqlalchemy.url", ini_value(url))
    cfg.attributes.update(attributes)
    return cfg


def _anchor_sys_path(cfg: Config, here: Path) -> None:
    """`prepend_sys_path = .` means the project's folder to the `alembic` command, which is
    run from there; queueguard may run anywhere, so relative entries are taken from the
    ini's folder (an env.py importing the project's models then finds them)."""
    if not cfg.get_main_option("prepend_sys_path"):
        return
    entries = [str((here / entry).resolve()) for entry in cfg.get_prepend_sys_paths_list() or []]
    cfg.set_main_option("path_separator", "os")
    cfg.set_main_option("prepend_sys_path", os.pathsep.join(entries).replace("%", "%%"))


@contextmanager
def _alembic_running() -> Iterator[None]:
    """One env.py at a time, and the process's logging as it was afterwards: a project's env.py
    usually calls `fileConfig`, which replaces the root logger's handlers and disables every
    logger that existed before it (the host's own)."""
    manager = logging.Logger.manager
    root = logging.getLogger()
    saved_root = (root.level, list(root.handlers))
    saved = {
        name: (lg.disabled, lg.level, list(lg.handlers), lg.propagate)
        for name, lg in manager.loggerDict.items()
        if isinstance(lg, logging.Logger)
    }
    with _ALEMBIC:
        try:
            yield
        finally:
            root.setLevel(saved_root[0])
            root.handlers[:] = saved_root[1]
            for name, (disabled, level, handlers, propagate) in saved.items():
                lg = logging.getLogger(name)
                lg.disabled, lg.propagate = disabled, propagate
                lg.setLevel(level)
                lg.handlers[:] = handlers


# --- reading the set ---------------------------------------------------------------------


def _script_directory(cfg: Config) -> ScriptDirectory:
    try:
        return ScriptDirectory.from_config(cfg)
    except CommandError as exc:
        raise UsageError(f"{cfg.get_main_option('script_location')}: {exc}") from None


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
                f"({type(offline).__name__}: {redact(str(offline))}); give a database"
            ) from offline
    with _connected(dsn, READ_ONLY) as connection:
        cfg = config(root, with_options(dsn, READ_ONLY), connection=connection)
        try:
            return _configured_table(cfg, script, as_sql=False)
        finally:
            connection.rollback()


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


def load(root: Path) -> MigrationSet:
    """The project's revisions, base → head, and its version table as bookkeeping (env.py is
    run in offline mode to learn it: see `version_table`)."""
    cfg = config(root, None)
    script = _script_directory(cfg)
    revisions = tuple(_revision(s) for s in _line(script, root))
    table = version_table(root)
    return MigrationSet(
        format=FORMAT,
        root=root,
        revisions=revisions,
        bookkeeping=frozenset({table.qualified}),
        version_table=table.qualified,
    )


# --- the database ------------------------------------------------------------------------


@contextmanager
def _connected(dsn: str, options: str | None = None) -> Iterator[sa.Connection]:
    engine = sa.create_engine(sqlalchemy_url(dsn, options), poolclass=NullPool)
    try:
        try:
            connection = engine.connect()
        except sa.exc.OperationalError as exc:
            raise ConnectionFailed(
                f"cannot connect to {redact(dsn)}: {driver_reason(exc.orig or exc)}"
            ) from None
        with connection:
            yield connection
    finally:
        engine.dispose()


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


class _Hooks:
    """SQLAlchemy cursor events on the Engine class (so an engine env.py builds itself is
    hooked too) → the caller's before/after, for the thread that runs the revision only."""

    def __init__(self, before: Before | None, after: After | None, dsn: str) -> None:
        self.before, self.after = before, after
        self.thread = threading.get_ident()
        self.started: dict[int, float] = {}
        self.dsn = dsn

    def _mine(self) -> bool:
        return threading.get_ident() == self.thread

    def on_before(
        self, conn: sa.Connection, _cursor: Any, statement: str, _p: Any, context: Any, _m: bool
    ) -> None:
        if not self._mine():
            return
        refuse_elsewhere(conn.connection.dbapi_connection, self.dsn)
        if self.before is not None:
            self.before(conn.connection.dbapi_connection, statement)
        self.started[id(context)] = time.perf_counter()  # after the hook: its own time is not

    def on_after(
        self, conn: sa.Connection, _cursor: Any, statement: str, _p: Any, context: Any, _m: bool
    ) -> None:
        if not self._mine():
            return
        seconds = time.perf_counter() - self.started.pop(id(context), time.perf_counter())
        if self.after is not None:
            self.after(conn.connection.dbapi_connection, statement, seconds, None)

    def on_error(self, failure: sa.engine.ExceptionContext) -> None:
        if not self._mine() or failure.execution_context is None:
            return  # an error before any statement was sent (connecting): no before either
        started = self.started.pop(id(failure.execution_context), None)
        if started is None or self.after is None or failure.connection is None:
            return
        seconds = time.perf_counter() - started
        error = failure.original_exception
        raw = failure.connection.connection.dbapi_connection
        self.after(raw, failure.statement or "", seconds, error)

    @contextmanager
    def listening(self) -> Iterator[None]:
        listeners: list[tuple[str, Callable[..., None]]] = [
            ("before_cursor_execute", self.on_before),
            ("after_cursor_execute", self.on_after),
            ("handle_error", self.on_error),
        ]
        for name, fn in listeners:
            event.listen(sa.Engine, name, fn)
        try:
            yield
        finally:
            for name, fn in listeners:
                event.remove(sa.Engine, name, fn)


def _where(dsn: str) -> tuple[str, str, str]:
    """(database, host, port) a DSN names, libpq's environment defaults filled in ("" where
    nothing says: not compared)."""
    found = params(dsn)
    return (
        str(found.get("dbname") or os.environ.get("PGDATABASE") or found.get("user") or ""),
        str(found.get("host") or os.environ.get("PGHOST") or ""),
        str(found.get("port") or os.environ.get("PGPORT") or ""),
    )


def refuse_elsewhere(raw: Any, dsn: str) -> None:
    """Refuse a statement about to run on another database than `dsn`: an env.py that
    connects by its own settings (`DATABASE_URL`, the application's config) instead of the
    URL or connection it was given would otherwise migrate that database — production, when
    queueguard meant a scratch copy."""
    info = getattr(raw, "info", None)
    if info is None:
        return
    want_db, want_host, want_port = _where(dsn)
    got = (str(info.dbname), str(info.host or ""), str(info.port or ""))
    differs = [
        want != have
        for want, have in zip((want_db, want_host, want_port), got, strict=True)
        if want
    ]
    if any(differs):
        raise UsageError(
            f"the project's env.py connected to database {got[0]!r} on {got[1]}:{got[2]}, not "
            f"to the one queueguard gave it ({want_db!r} on {want_host or 'the default host'}:"
            f"{want_port or 'the default port'}); nothing was run there. Make env.py use "
            "config.attributes['connection'] or the sqlalchemy.url queueguard sets"
        )


@contextmanager
def _pgoptions(options: str | None) -> Iterator[None]:
    """`options` in PGOPTIONS while env.py runs (under `_ALEMBIC`): an engine env.py builds
    from a URL of its own still gets lock_timeout and statement_timeout from libpq."""
    if not options:
        yield
        return
    saved = os.environ.get("PGOPTIONS")
    os.environ["PGOPTIONS"] = f"{saved} {options}" if saved else options
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop("PGOPTIONS", None)
        else:
            os.environ["PGOPTIONS"] = saved


def run(
    root: Path,
    dsn: str,
    revision_id: str,
    *,
    before: Before | None = None,
    after: After | None = None,
    options: str | None = None,
) -> None:
    """Apply exactly one revision (the database must be at its down revision) with
    `command.upgrade` through the project's env.py, calling `before(dbapi_connection, sql)`
    and `after(dbapi_connection, sql, seconds, error)` around every statement sent, Alembic's
    own included (tell them apart with `is_bookkeeping(sql, table)`). The connection given
    to the hooks is psycopg's: a hook may query on it, in the statement's transaction (after
    a failed statement that transaction is aborted). `options` (libpq's, e.g.
    `-c lock_timeout=5000`) is carried by every connection: in sqlalchemy.url for an env.py
    that builds its own engine, and on the connection in `config.attributes["connection"]`
    for one that takes the caller's."""
    migrations = load(root)
    revision = migrations.get(revision_id)
    table = next(iter(migrations.bookkeeping))
    at = current(dsn, table)
    if at != revision.down:
        raise UsageError(
            f"{revision.id} applies after {revision.down or 'an empty database'}, "
            f"but the database is at {at or 'no revision'}"
        )
    hooks = _Hooks(before, after, dsn)
    with _connected(dsn, options) as connection:
        cfg = config(root, with_options(dsn, options), connection=connection)
        try:
            with _alembic_running(), hooks.listening(), _pgoptions(options):
                command.upgrade(cfg, revision.id)
            connection.commit()  # the shared connection's transaction, if env.py left one
        except CommandError as exc:
            raise UsageError(f"{root}: {exc}") from None
        except sa.exc.DBAPIError as exc:
            raise MigrationError(
                f"revision {revision.id} of {root} failed: {driver_reason(exc.orig or exc)}"
                " (statements run in an autocommit block stay applied)"
            ) from exc
    # The table was learnt from env.py's offline branch; one that configures another table
    # online would leave `current` (and every later run) reading the wrong one.
    after_run = current(dsn, table)
    if after_run != revision.id:
        raise MigrationError(
            f"{root}: {revision.id} ran, but version table {table} says {after_run}: does "
            "env.py configure another version_table online than offline?"
        )


def render(root: Path, revision_id: str) -> str | None:
    """One revision's SQL as `alembic upgrade DOWN:REV --sql` renders it (offline: no
    database), Alembic's own bookkeeping and transaction control left out; None when the
    revision cannot be rendered offline (a data migration that reads rows)."""
    from queueguard.sets.split import is_transaction_control, split

    migrations = load(root)
    revision = migrations.get(revision_id)
    table = migrations.version_table or DEFAULT_VERSION_TABLE
    cfg = config(root, None)
    buffer = io.StringIO()
    cfg.output_buffer = buffer
    try:
        with _alembic_running():
            command.upgrade(cfg, f"{revision.down or 'base'}:{revision.id}", sql=True)
    except Exception:
        return None
    kept = [
        s
        for s in split(buffer.getvalue())
        if not is_bookkeeping(s, table) and not is_transaction_control(s)
    ]
    return "".join(f"{s};\n" for s in kept)
