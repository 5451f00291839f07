"""PostgreSQL's client programs (pg_dump, psql) from the embedded wheel, run against a DSN.

The password travels in the environment (PGPASSWORD), never on a command line that `ps`
shows, and errors never quote the DSN.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Sequence

from psycopg.conninfo import make_conninfo

from queueguard.pg import dsn as dsns
from queueguard.pg.servers import embedded_bin_dir


def run(
    program: str, dsn: str, args: Sequence[str], *, stdin: bytes | None = None
) -> subprocess.CompletedProcess[bytes]:
    """Run `program` (pg_dump, psql, …) against `dsn`; the caller checks the return code."""
    params = dsns.params(dsn)
    env = dict(os.environ)
    password = params.pop("password", None)
    if password:
        env["PGPASSWORD"] = password
    return subprocess.run(
        [str(embedded_bin_dir() / program), *args, "-d", make_conninfo(**params)],
        input=stdin,
        env=env,
        capture_output=True,
        check=False,
    )
