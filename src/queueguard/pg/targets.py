"""Which database a command talks to (docs/interfaces.md "Choosing the database").

`--dsn`, else `QUEUEGUARD_DSN`. Read-only commands (status, inspect, snapshot export) fall back
to the embedded server; commands that change or judge a target need it explicitly (`--dsn`,
`QUEUEGUARD_DSN` or `--embedded`).
"""

from __future__ import annotations

import os
import re

from psycopg import sql

from queueguard.errors import UsageError
from queueguard.pg import servers
from queueguard.pg.connect import connection
from queueguard.pg.dsn import validate, with_params

ENV_DSN = "QUEUEGUARD_DSN"
#: The database queueguard uses on its own embedded server.
EMBEDDED_DB = "queueguard"


def embedded_dsn(dbname: str = EMBEDDED_DB) -> str:
    """DSN of a database on the embedded server, creating server and database on demand."""
    admin = servers.embedded_server().ensure_running()
    with connection(admin, autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (dbname,)).fetchone()
        if not exists:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(dbname)))
    return with_params(admin, dbname=dbname)


def resolve(dsn: str | None, *, embedded: bool = False, fallback: bool = False) -> str:
    """The target DSN; raises UsageError when an explicit target is required and missing."""
    if dsn:
        return validate(dsn)
    if embedded:
        return embedded_dsn()
    from_env = os.environ.get(ENV_DSN)
    if from_env:
        return validate(from_env)
    if fallback:
        return embedded_dsn()
    raise UsageError(f"this command needs an explicit target: --dsn, {ENV_DSN} or --embedded")


_DURATION = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*(ms|s|min|m|h|d)?\s*$")
#: each unit in ms: queueguard's `m`, and PostgreSQL's own (as lock_timeout takes them)
_UNITS = {"ms": 1, "s": 1000, "m": 60_000, "min": 60_000, "h": 3_600_000, "d": 86_400_000}
MAX_DURATION_MS = 2**31 - 1


def parse_duration_ms(text: str) -> int:
    """`500ms`, `5s`, `2m` (PostgreSQL's `2min`, `1h`, `1d`) or plain seconds, as ms."""
    match = _DURATION.match(text)
    if not match:
        raise UsageError(f"bad duration {text!r}: use e.g. 500ms, 5s or 2m")
    value, unit = float(match.group(1)), match.group(2) or "s"
    ms = int(value * _UNITS[unit])
    if ms > MAX_DURATION_MS:  # PostgreSQL's timeouts are int milliseconds
        raise UsageError(f"duration {text!r} is too long (at most {MAX_DURATION_MS} ms)")
    return ms
