"""The swap: one short transaction under ACCESS EXCLUSIVE on the table (lock_timeout and the
runner's ladder around it) that replays the last logged changes and puts the shadow in the
table's place, keeping every name and every OID-bound dependent:

1. identity sequences: the shadow's own take the old ones' values; serial sequences let go
   of the old table (OWNED BY NONE) and are tied to the new one after — same OID, name and
   value, and the shadow's defaults already name them;
2. other tables' foreign keys to the table are dropped; the old table loses its own foreign
   keys, publication rows and extended statistics and moves to `queueguard_shadow_old`;
3. the shadow moves into the table's schema (SET SCHEMA takes its indexes, constraints,
   row type and identity sequences along, names kept);
4. views reading the table are replaced by their own definition (CREATE OR REPLACE VIEW
   keeps the view's OID, owner, grants and dependents), now resolving to the new table;
5. storage parameters as the statement left them; then the dump's last statements as dumped
   (foreign keys NOT VALID, triggers and their enabled state, policies, row security),
   extended statistics, publication rows, other tables' foreign keys NOT VALID;
6. a ledger row: the statement is swapped, with what is left.

What is left runs after it: each foreign key's validation in a transaction of its own
(SHARE UPDATE EXCLUSIVE: no writer waits), then the statement's last transaction drops the
old table, the log and both schemas under lock_timeout — a drop's files go at its commit, in
time proportional to the table, which is why it is not in the swap. A rerun that finds the
ledger does only what is left."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import psycopg

from queueguard.engine.online.context import Context
from queueguard.engine.online.names import quote
from queueguard.engine.online.rebuild.catalog import (
    CAPTURE_FUNCTION,
    LEDGER,
    LOG,
    OLD_SCHEMA,
    SHADOW_SCHEMA,
    Q,
    fingerprint,
    schema_exists,
)
from queueguard.engine.online.rebuild.ddl import SWAP
from queueguard.engine.online.rebuild.replay import replay_batch
from queueguard.engine.online.rebuild.shadow import Build, execute
from queueguard.errors import LockTimeout, MigrationError

#: logged changes the swap replays under its lock at most (fewer when the replays measured
#: a change slow: `rebuild.swap_limit`); more, and it lets go to replay
SWAP_REPLAY_LIMIT = 10_000


class Behind(Exception):
    """The log grew past what the swap replays under its lock: replay more first."""


@dataclass(frozen=True)
class Pending:
    """A rebuild whose swap committed: the statement, the validations still to run."""

    relation: str
    statement: str
    validations: tuple[str, ...]


def wraparound_vacuums(conn: psycopg.Connection[Any], relations: Sequence[str]) -> list[str]:
    """Anti-wraparound autovacuums of those of `relations` that exist."""
    rows = conn.execute(Q["wraparound_vacuums"], {"relations": list(relations)}).fetchall()
    return [f"pid {pid} on {rel}" for pid, rel in rows]


def swap(
    conn: psycopg.Connection[Any], build: Build, limit: int | None, locked: list[float]
) -> list[str]:
    """The swap, in the caller's transaction; the validations it leaves (SQL), written to
    the ledger too. `limit`: the most logged changes it replays under the lock (None: all of
    them); `locked[0]` is set to when the lock was granted."""
    t = build.table
    (incoming,) = _read(conn, t.oid, "incoming_foreign_keys")
    children = sorted({row[0] for row in incoming})
    # the tables the table's foreign keys point at too: dropping the old table's keys takes
    # ACCESS EXCLUSIVE on them (taken first, not upgraded to half way)
    parents = [row[0] for row in _read(conn, t.oid, "referenced_tables")[0]]
    exclusive = ", ".join(dict.fromkeys([t.qualified, t.shadow, LOG, *children, *parents]))
    conn.execute(f"LOCK TABLE {exclusive} IN ACCESS EXCLUSIVE MODE")
    locked[0] = time.perf_counter()
    if fingerprint(conn, t) != build.fingerprint:
        raise MigrationError(
            f"rebuild: {t.qualified} was altered while it was rebuilt (its definition differs "
            "from its dump's); nothing was swapped: rerun, and the rebuild starts over"
        )
    if _read(conn, t.oid, "incoming_foreign_keys")[0] != incoming:  # read before the lock
        raise MigrationError(
            f"rebuild: a foreign key to {t.qualified} changed as the swap began; nothing was "
            "swapped: rerun"
        )
    row = conn.execute(Q["log_size"]).fetchone()
    logged = int(row[0]) if row else 0
    if limit is not None and logged > limit:
        raise Behind
    # all of it in one batch: nobody writes now, and a whole log leaves the shadow equal to
    # the table (a part could re-read a row whose unique value an untaken entry frees)
    replay_batch(conn, build.copy, logged + 1)
    views, publications, statistics, own_keys = _read(
        conn, t.oid, "dependent_views", "publications", "statistics_objects", "own_foreign_keys"
    )
    states = _identity_states(conn, build)
    # the rest is DDL whose results nobody reads: sent as one pipeline, so the lock is held
    # for the server's work and not for a trip to it and back per statement
    with conn.pipeline():
        _identities(conn, build, states)
        for seq in t.serials:
            conn.execute(f"ALTER SEQUENCE {seq.qualified} OWNED BY NONE")
        for child, name, *_ in incoming:
            conn.execute(f"ALTER TABLE {child} DROP CONSTRAINT {name}")
        _retire(conn, build, publications, statistics, own_keys)
        conn.execute(f"ALTER TABLE {t.shadow} SET SCHEMA {quote(t.schema)}")
        for view, definition, options in views:
            with_options = f" WITH ({', '.join(options)})" if options else ""
            conn.execute(f"CREATE OR REPLACE VIEW {view}{with_options} AS {definition}")
        for seq in t.serials:
            if seq.column in build.columns:
                conn.execute(
                    f"ALTER SEQUENCE {seq.qualified} OWNED BY {t.qualified}.{quote(seq.column)}"
                )
            else:  # the statement dropped the column, and the plain one its sequence with it
                conn.execute(f"DROP SEQUENCE {seq.qualified}")
        _storage_parameters(conn, build)
        validations = _recreate(conn, build, statistics, publications, incoming)
        conn.execute(Q["ledger_create"])
        conn.execute(Q["ledger_write"], (t.qualified, build.statement.sql, validations))
    return validations


def _recreate(
    conn: psycopg.Connection[Any],
    build: Build,
    statistics: Sequence[tuple[Any, ...]],
    publications: Sequence[tuple[Any, ...]],
    incoming: Sequence[tuple[Any, ...]],
) -> list[str]:
    """What comes back on the new table in its place: the dump's last statements as dumped,
    extended statistics, publication rows, other tables' foreign keys; the validations
    the foreign keys added NOT VALID still need."""
    t = build.table
    validations: list[str] = []
    for step in build.steps(SWAP):
        text = step.dumped
        if step.validate and step.needs:
            text = f"{text.rstrip().rstrip(';')} NOT VALID"
            validations.append(
                f"ALTER TABLE {t.qualified} VALIDATE CONSTRAINT {quote(step.needs[1])}"
            )
        execute(conn, step, text)
    _statistics(conn, build, statistics)
    for publication, columns, where in publications:
        listed = f" ({columns})" if columns else ""
        filtered = f" WHERE ({where})" if where else ""
        conn.execute(
            f"ALTER PUBLICATION {publication} ADD TABLE ONLY {t.qualified}{listed}{filtered}"
        )
    for child, name, definition, valid, comment in incoming:
        later = " NOT VALID" if valid else ""
        conn.execute(f"ALTER TABLE {child} ADD CONSTRAINT {name} {definition}{later}")
        if comment is not None:
            conn.execute(f"COMMENT ON CONSTRAINT {name} ON {child} IS {_literal(comment)}")
        if valid:
            validations.append(f"ALTER TABLE {child} VALIDATE CONSTRAINT {name}")
    return validations


def _identity_states(conn: psycopg.Connection[Any], build: Build) -> dict[str, tuple[Any, ...]]:
    """{column: (last value, is_called)} of the old identity sequences the shadow keeps."""
    states = {}
    for seq in build.table.identities:
        if seq.column in build.columns:
            state = conn.execute(Q["sequence_state"].format(sequence=seq.qualified)).fetchone()
            assert state is not None
            states[seq.column] = tuple(state)
    return states


def _identities(
    conn: psycopg.Connection[Any], build: Build, states: dict[str, tuple[Any, ...]]
) -> None:
    """The shadow's identity sequences where the old ones are (nothing called them yet: the
    copy wrote every value)."""
    for column, (value, called) in states.items():
        conn.execute(
            Q["set_sequence"],
            {"table": build.table.shadow, "column": column, "value": value, "called": called},
        )


def _retire(
    conn: psycopg.Connection[Any],
    build: Build,
    publications: Sequence[tuple[Any, ...]],
    statistics: Sequence[tuple[Any, ...]],
    own_keys: Sequence[tuple[Any, ...]],
) -> None:
    """The old table out of the way, kept (emptied of meaning) until the statement's last
    transaction drops it: its files go at that commit, which takes time in proportion to the
    table, and no reader or writer waits for it there. What could still reach it goes now:
    its foreign keys (a parent's delete would check its stale rows), its publication rows,
    its extended statistics (their names are the new table's)."""
    t = build.table
    for publication, *_ in publications:
        conn.execute(f"ALTER PUBLICATION {publication} DROP TABLE ONLY {t.qualified}")
    for name, *_ in statistics:
        conn.execute(f"DROP STATISTICS {name}")
    for (name,) in own_keys:
        conn.execute(f"ALTER TABLE {t.qualified} DROP CONSTRAINT {name}")
    conn.execute(f"CREATE SCHEMA {OLD_SCHEMA}")
    conn.execute(f"ALTER TABLE {t.qualified} SET SCHEMA {OLD_SCHEMA}")


def finish(conn: psycopg.Connection[Any]) -> None:
    """The statement's last transaction: the old table, the log, the capture function, the
    ledger and both schemas dropped (never CASCADE: what is left must be only ours)."""
    row = conn.execute(Q["old_table"], {"schema": OLD_SCHEMA}).fetchone()
    if row is not None:
        conn.execute(f"DROP TABLE {row[0]}")
    if schema_exists(conn, OLD_SCHEMA):
        conn.execute(f"DROP SCHEMA {OLD_SCHEMA}")
    conn.execute(f"DROP TABLE IF EXISTS {LOG}")
    conn.execute(f"DROP FUNCTION IF EXISTS {CAPTURE_FUNCTION}")
    conn.execute(f"DROP TABLE IF EXISTS {LEDGER}")
    conn.execute(f"DROP SCHEMA {SHADOW_SCHEMA}")


def _read(conn: psycopg.Connection[Any], oid: int, *names: str) -> list[list[tuple[Any, ...]]]:
    """The rows of each named catalog query about the table, every name in them qualified
    (an empty search_path for the definitions printed, given back after), in one trip."""
    saved = conn.execute("SELECT current_setting('search_path')").fetchone()
    with conn.pipeline():
        conn.execute("SELECT set_config('search_path', '', true)")
        cursors = [conn.execute(Q[name], {"oid": oid}) for name in names]
        conn.execute("SELECT set_config('search_path', %s, true)", (saved[0] if saved else "",))
    return [[tuple(r) for r in cursor.fetchall()] for cursor in cursors]


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _storage_parameters(conn: psycopg.Connection[Any], build: Build) -> None:
    """The statement's storage parameters, in their order, with autovacuum back on."""
    t = build.table
    main, toast = build.reloptions
    keys = ["autovacuum_enabled", "toast.autovacuum_enabled"]
    keys += [o.split("=", 1)[0] for o in main] + [f"toast.{o.split('=', 1)[0]}" for o in toast]
    conn.execute(f"ALTER TABLE {t.qualified} RESET ({', '.join(dict.fromkeys(keys))})")
    values = [*main, *(f"toast.{o}" for o in toast)]
    if values:
        pairs = [_option(v) for v in values]
        conn.execute(f"ALTER TABLE {t.qualified} SET ({', '.join(pairs)})")


def _option(option: str) -> str:
    key, value = option.split("=", 1)
    return f"{key} = {_literal(value)}"


def _statistics(
    conn: psycopg.Connection[Any], build: Build, rows: Sequence[tuple[Any, ...]]
) -> None:
    """Extended statistics as they were (the old table took them along when it went); one
    on a column the statement dropped went with it in the plain statement too."""
    for name, definition, owner, target, comment, columns in rows:
        if not set(columns) <= build.columns:
            continue
        conn.execute(definition)
        conn.execute(f"ALTER STATISTICS {name} OWNER TO {owner}")
        if target is not None and target >= 0:
            conn.execute(f"ALTER STATISTICS {name} SET STATISTICS {target}")
        if comment is not None:
            conn.execute(f"COMMENT ON STATISTICS {name} IS {_literal(comment)}")


def ledger(conn: psycopg.Connection[Any]) -> Pending | None:
    if not schema_exists(conn, SHADOW_SCHEMA):
        return None
    exists = conn.execute(Q["ledger_exists"]).fetchone()
    if not exists or not exists[0]:
        return None
    row = conn.execute(Q["ledger_read"]).fetchone()
    return None if row is None else Pending(row[0], row[1], tuple(row[2]))


def complete(ctx: Context, pending: Pending) -> None:
    """What is left after the swap: each validation in its own transaction (SHARE UPDATE
    EXCLUSIVE: no writer waits), then the drop of the old table — the statement's end."""
    for text in pending.validations:

        def validate(conn: psycopg.Connection[Any], text: str = text) -> None:
            conn.execute(text)

        ctx.transaction(validate)
    ctx.transaction(finish, last=True)


def blocked(names: list[str]) -> LockTimeout:
    return LockTimeout(
        "rebuild: an anti-wraparound autovacuum holds "
        + ", ".join(names)
        + " and never yields its lock; nothing waited behind it: rerun once it has ended"
    )
