"""What a fleet runner reads from the targets themselves before its first claim: the revision
each target is at (so the ones already there are recorded without a claim) and the
connections each server has left (the per-server cap its claims count against). Apart from
`fleet.run` because these are reads of the target databases, where the run itself is kept
in the control database.
"""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

from queueguard.errors import ConnectionFailed
from queueguard.fleet import apply
from queueguard.fleet.targets import Target
from queueguard.pg.connect import connect
from queueguard.pg.sqlfiles import queries
from queueguard.sets import MigrationSet

Q = queries("queueguard.fleet", "fleet.sql")
#: connections a target's upgrade opens, by format (the per-server cap counts by them)
CONNECTIONS = {"sqldir": 1, "temporal": 1, "alembic": 2, "queueguard": 2, "django": 2}


def revisions(mset: MigrationSet, targets: list[Target]) -> Iterator[tuple[Target, str | None]]:
    """Each target's revision, each database read on one connection (every schema of it on
    that connection). A target that cannot be read is left out: its claim records why."""
    by_database: dict[str, list[Target]] = {}  # by DSN: each with its own credentials
    for t in targets:
        by_database.setdefault(t.dsn, []).append(t)

    def read(group: list[Target]) -> list[tuple[Target, str | None]]:
        try:
            conn = connect(group[0].dsn, application_name="queueguard-fleet")
        except ConnectionFailed:
            return []
        found = []
        with conn:
            for t in group:
                try:
                    if t.schema is not None:
                        conn.execute("SELECT set_config('search_path', %s, false)",
                                     (apply.quoted(t.schema),))  # fmt: skip
                    else:
                        conn.execute("RESET search_path")
                    conn.commit()
                    found.append((t, apply.current(mset, t, conn)))
                except Exception:  # its claim records what is wrong
                    conn.rollback()
        return found

    with ThreadPoolExecutor(8) as pool:  # yielded as each database is read
        for group in pool.map(read, by_database.values()):
            yield from group


def caps(set_format: str, targets: list[Target]) -> dict[str, int]:
    """Per server: the connections it has left now, in targets of this set's format."""
    per_target = CONNECTIONS.get(set_format, 2)
    caps: dict[str, int] = {}
    seen: set[str] = set()
    for t in targets:
        if t.server in seen:
            continue
        seen.add(t.server)
        try:
            with connect(t.dsn, application_name="queueguard-fleet") as conn:
                row = conn.execute(Q["headroom"]).fetchone()
                caps[t.server] = max(1, int(row[0]) // per_target) if row else 1
        except Exception:  # its targets fail on their claim
            continue
    return caps
