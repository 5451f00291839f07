"""Where scratch PostgreSQL servers come from, selected by one setting (`QUEUEGUARD_PG`).

- `embedded` (default): the pip wheel's server under the per-user data directory;
- `system`: the machine's PostgreSQL binaries (initdb/pg_ctl) under a temporary folder;
- `dsn:<url>`: an existing server where we may create and drop our own databases;
- `docker:<major>`: a throw-away container via testcontainers (needs a Docker engine).

Scratch databases are created with a `qg_` prefix and dropped by their owner; databases
that are not ours are never touched.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
import uuid
from dataclasses import replace
from pathlib import Path

from psycopg import sql

from queueguard.errors import EmbeddedServerError, UsageError
from queueguard.pg import servers
from queueguard.pg.connect import connection
from queueguard.pg.dsn import params, with_params

ENV = "QUEUEGUARD_PG"
_system_dirs: dict[str, Path] = {}


def server_dsn(spec: str | None = None) -> str:
    """Admin DSN (database `postgres`) of the server `spec` names, starting it if needed."""
    spec = spec or os.environ.get(ENV) or "embedded"
    if spec == "embedded":
        return servers.embedded_server().ensure_running()
    if spec == "system":
        folder = _system_dirs.get(spec)
        if folder is None:
            folder = Path(tempfile.mkdtemp(prefix="qg-system-", dir="/tmp"))
            folder.chmod(0o755)
            _system_dirs[spec] = folder
            server = _throw_away(folder)
            atexit.register(_discard, server, folder)  # a throw-away server: stop and delete
        return _throw_away(folder).ensure_running()
    if spec.startswith("dsn:"):
        return spec.removeprefix("dsn:")
    if spec.startswith("docker:"):
        return _docker(spec.removeprefix("docker:"))
    raise UsageError(f"{ENV}={spec!r}: expected embedded, system, dsn:<url> or docker:<major>")


def _throw_away(folder: Path) -> servers.LocalServer:
    """The system binaries' server in `folder`, deleted at exit, so fsync is off: a crash of
    the server loses nothing with it (the OS holds what was written), and one of the machine
    would lose the folder's purpose anyway; its many CREATE DATABASEs then wait on no disk."""
    return replace(servers.system_server(folder / "pgdata"), settings=("fsync=off",))


def _discard(server: servers.LocalServer, folder: Path) -> None:
    try:
        server.stop()
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _docker(major: str) -> str:
    """Start a container; one clear line when there is no Docker engine."""
    try:
        try:
            from testcontainers.community.postgres import PostgresContainer
        except ImportError:  # testcontainers < 4.14
            from testcontainers.postgres import PostgresContainer
    except ImportError as exc:
        raise EmbeddedServerError(f"docker:{major} needs testcontainers ({exc})") from None
    try:
        container = PostgresContainer(f"postgres:{major}", driver=None)
        container.start()
    except Exception as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise EmbeddedServerError(
            f"docker:{major}: no usable Docker engine ({first}); use QUEUEGUARD_PG=embedded"
        ) from None
    return str(container.get_connection_url())


class ScratchDatabases:
    """Scratch databases on one server, created on demand and dropped together.

    The one lifecycle every scratch user shares (verify, rehearse, the pytest plugin, the
    test suite, the benchmarks): `with ScratchDatabases(admin) as dbs: dsn = dbs.create()`.
    """

    def __init__(self, admin_dsn: str, *, prefix: str = "qg") -> None:
        self.admin_dsn = admin_dsn
        self.prefix = prefix
        self._names: list[str] = []

    def create(self, template: str | None = None) -> str:
        """A new empty database (or a clone of the database named `template`); its DSN."""
        dsn = create_database(self.admin_dsn, template=template, prefix=self.prefix)
        self._names.append(dbname_of(dsn))
        return dsn

    @property
    def names(self) -> list[str]:
        """The databases this object created and has not dropped, oldest first."""
        return list(self._names)

    def drop(self, dsn: str) -> None:
        name = dbname_of(dsn)
        drop_database(self.admin_dsn, name)
        if name in self._names:
            self._names.remove(name)

    def drop_all(self) -> None:
        """Drop every database this object created, newest first (clones before templates)."""
        while self._names:
            drop_database(self.admin_dsn, self._names.pop())

    def __enter__(self) -> ScratchDatabases:
        return self

    def __exit__(self, *exc: object) -> None:
        self.drop_all()


def database_dsn(admin_dsn: str, dbname: str) -> str:
    return with_params(admin_dsn, dbname=dbname)


def create_database(admin_dsn: str, *, template: str | None = None, prefix: str = "qg") -> str:
    """Create a scratch database (optionally a TEMPLATE clone); returns its DSN."""
    name = f"{prefix}_{uuid.uuid4().hex[:12]}"
    statement = sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name))
    if template:
        statement = sql.SQL("CREATE DATABASE {} TEMPLATE {}").format(
            sql.Identifier(name), sql.Identifier(template)
        )
    with connection(admin_dsn, autocommit=True) as conn:
        conn.execute(statement)
    return database_dsn(admin_dsn, name)


def drop_database(admin_dsn: str, dbname: str) -> None:
    """Drop one of our scratch databases (refuses names without our prefix)."""
    if not dbname.startswith("qg"):
        raise UsageError(f"refusing to drop {dbname!r}: not a queueguard scratch database")
    with connection(admin_dsn, autocommit=True) as conn:
        conn.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(dbname))
        )


def dbname_of(dsn: str) -> str:
    return params(dsn).get("dbname", "")
