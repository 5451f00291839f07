"""`[[discover]]`: the targets a server lists when the run starts — its databases or its
schemas matching a LIKE pattern, or the database names a read-only query returns (its
other columns the targets' labels)."""

from __future__ import annotations

from collections.abc import Sequence

import psycopg

from queueguard.errors import ConnectionFailed, FleetFileError
from queueguard.fleet.targets import Discover, FleetFile, Target
from queueguard.pg.connect import connect, reason
from queueguard.pg.dsn import redact, with_params
from queueguard.pg.sqlfiles import queries

Q = queries("queueguard.fleet", "fleet.sql")


def resolve(fleet: FleetFile) -> list[Target]:
    """The file's targets, then each [[discover]]'s, in order. A server that cannot be
    reached stops the run before anything is claimed (exit 2); a discovery finding nothing
    is refused (exit 2)."""
    found: list[Target] = list(fleet.targets)
    for entry in fleet.discover:
        listed = _listed(entry)
        if not listed:
            raise FleetFileError(
                f"{fleet.path}: {entry.key}: found no target on {redact(entry.dsn)}"
            )
        found.extend(listed)
    return found


def _listed(entry: Discover) -> Sequence[Target]:
    try:
        conn = connect(entry.dsn, application_name="queueguard-fleet")
    except ConnectionFailed as exc:
        raise ConnectionFailed(f"{entry.key}: {exc}") from None
    try:
        with conn:
            if entry.databases is not None:
                rows = conn.execute(Q["databases"], {"pattern": entry.databases}).fetchall()
                return [
                    Target(r[0], with_params(entry.dsn, dbname=r[0]), None, dict(entry.labels))
                    for r in rows
                ]
            if entry.schemas is not None:
                database = conn.info.dbname
                rows = conn.execute(Q["schemas"], {"pattern": entry.schemas}).fetchall()
                return [
                    Target(f"{database}/{r[0]}", entry.dsn, r[0], dict(entry.labels)) for r in rows
                ]
            assert entry.query is not None
            conn.read_only = True
            cur = conn.execute(entry.query)
            names = [c.name for c in cur.description or ()]
            targets = []
            for row in cur.fetchall():
                labels = dict(entry.labels)
                labels.update({n: str(v) for n, v in zip(names[1:], row[1:], strict=True)})
                targets.append(Target(str(row[0]), with_params(entry.dsn, dbname=str(row[0])),
                                      None, labels))  # fmt: skip
            return targets
    except psycopg.Error as exc:
        raise FleetFileError(f"{entry.key}: {reason(exc)}") from None
