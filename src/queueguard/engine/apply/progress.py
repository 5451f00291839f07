"""`queueguard_progress`: how far a revision split by a statement that runs outside a
transaction got. A row is written before such a statement and moved past it after; the
revision's bookkeeping transaction deletes it (and the table with its last row), so a
completed upgrade leaves nothing of ours behind."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import psycopg

from queueguard.pg.sqlfiles import queries
from queueguard.sets import Revision
from queueguard.sets.model import CAPTURED

Q = queries("queueguard.engine.apply", "session.sql")


def checksum(revision: Revision) -> str:
    """What a progress row pins: the revision's statements (a resumed revision whose files
    changed meanwhile is refused) — and, for statements a run captured (kept in the row, so
    always the same), the digest of the file they came from."""
    text = "\x00".join(revision.statements or ())
    if revision.native.get(CAPTURED):
        text = f"{revision.checksum}\x00{text}"
    return hashlib.sha256(text.encode()).hexdigest()


def read(conn: psycopg.Connection[Any]) -> dict[str, tuple[int, str]]:
    """{revision: (next statement index, checksum)} of every revision in progress."""
    row = conn.execute(Q["progress_exists"]).fetchone()
    if not row or not row[0]:
        return {}
    return {r[0]: (int(r[1]), str(r[2])) for r in conn.execute(Q["progress_read"]).fetchall()}


def write(
    conn: psycopg.Connection[Any], rev: Revision, index: int, forms: str | None = None
) -> None:
    """The revision is done up to statement `index` (exclusive); `forms`: statement `index`
    is in flight with these online forms (JSON). A revision whose SQL a run chose (a Django
    migration as its migrate sent it) keeps its statements beside, for a rerun."""
    kept = json.dumps(list(rev.statements or ())) if rev.native.get(CAPTURED) else None
    conn.execute(Q["progress_create"])
    conn.execute(Q["progress_columns"])
    conn.execute(
        Q["progress_write"],
        {
            "revision": rev.id, "statement": index, "sha256": checksum(rev), "forms": forms,
            "statements": kept,
        },
    )  # fmt: skip


def statements(conn: psycopg.Connection[Any]) -> dict[str, tuple[str, ...]]:
    """{revision: the statements kept with its progress row} (see `write`)."""
    row = conn.execute(Q["progress_exists"]).fetchone()
    if not row or not row[0]:
        return {}
    has = conn.execute(Q["progress_has_statements"]).fetchone()
    if not has or not has[0]:
        return {}
    rows = conn.execute(Q["progress_statements"]).fetchall()
    return {r[0]: tuple(json.loads(r[1])) for r in rows}


def write_forms(conn: psycopg.Connection[Any], rev: Revision, forms: str) -> None:
    """The forms of the statement in flight, as they now run (names resolved)."""
    conn.execute(Q["progress_forms"], {"revision": rev.id, "forms": forms})


def write_step(conn: psycopg.Connection[Any], rev: Revision, step: int) -> None:
    """The first `step` online forms of the statement in flight are done."""
    conn.execute(Q["progress_step"], {"revision": rev.id, "step": step})


def in_flight(conn: psycopg.Connection[Any]) -> tuple[str, int, str, int] | None:
    """(revision, statement, forms JSON, forms done) of a statement begun online and not
    finished."""
    row = conn.execute(Q["progress_exists"]).fetchone()
    if not row or not row[0]:
        return None
    columns = conn.execute(Q["progress_has_forms"]).fetchone()
    if not columns or not columns[0]:
        return None
    found = conn.execute(Q["progress_in_flight"]).fetchone()
    return None if found is None else (found[0], int(found[1]), found[2], int(found[3]))


def committed(conn: psycopg.Connection[Any], rev: Revision) -> int:
    """How many of the revision's statements are committed (read after a failure)."""
    found = read(conn).get(rev.id)
    conn.rollback()
    return found[0] if found else 0


def clear(conn: psycopg.Connection[Any], rev: Revision) -> None:
    """The revision's row gone, and the table with the last row (in its bookkeeping
    transaction)."""
    row = conn.execute(Q["progress_exists"]).fetchone()
    if row and row[0]:
        conn.execute("DELETE FROM queueguard_progress WHERE revision = %s", (rev.id,))
        left = conn.execute("SELECT count(*) FROM queueguard_progress").fetchone()
        if left and not left[0]:
            conn.execute(Q["progress_drop"])
