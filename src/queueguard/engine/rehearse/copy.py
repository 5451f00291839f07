"""A copy of the target for a rehearsal: a TEMPLATE clone where the server allows it (no
other session on the source, the same server), else pg_dump restored with psql."""

from __future__ import annotations

import psycopg

from queueguard.engine.dumps import normalise_dump
from queueguard.errors import QueueguardError
from queueguard.pg import scratch, tools
from queueguard.pg.dsn import params as dsn_params
from queueguard.pg.dsn import redact
from queueguard.pg.scratch import ScratchDatabases


def copy_database(source_dsn: str, databases: ScratchDatabases) -> tuple[str, str]:
    """A copy of the source: TEMPLATE clone if possible, else pg_dump | psql."""
    try:
        return databases.create(template=scratch.dbname_of(source_dsn)), "template"
    except QueueguardError:
        raise
    except psycopg.Error:
        pass  # other sessions are connected or the scratch server is another server
    try:
        target = databases.create()
    except psycopg.Error as exc:  # e.g. a role without CREATEDB
        raise QueueguardError(
            "cannot create a scratch database for the rehearsal on "
            f"{redact(databases.admin_dsn)}: {redact(str(exc)).strip()}; pass --scratch-dsn, "
            "the admin DSN of a server where you may create databases"
        ) from None
    dbname = dsn_params(source_dsn).get("dbname")
    dump = tools.run("pg_dump", source_dsn, ["--no-owner", "--no-privileges"])
    if dump.returncode != 0:
        raise QueueguardError(
            f"pg_dump of {dbname} failed: {redact(dump.stderr.decode(errors='replace'))[-500:]}"
        )
    restore = tools.run(
        "psql",
        target,
        ["-v", "ON_ERROR_STOP=1", "-q"],
        stdin=normalise_dump(dump.stdout.decode()).encode(),  # loads on older majors too
    )
    if restore.returncode != 0:
        raise QueueguardError(
            f"restoring the dump of {dbname} failed: "
            f"{restore.stderr.decode(errors='replace')[-500:]}"
        )
    return target, "dump"
