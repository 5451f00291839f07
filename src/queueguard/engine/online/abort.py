"""`upgrade --migrations DIR --online --phase abort`: the statement in flight undone — the
shadow with its log and triggers, an index being built, a constraint added NOT VALID, the
temporary NOT NULL checks — so the catalog is the one before that statement. What committed
before it stays (a statement is never half undone): when the statement in flight is its
version's first, as Temporal's one-ALTER versions are, the database is as before the version
and the progress row goes too."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from queueguard.engine.apply import progress, runner_lock
from queueguard.engine.apply.session import Limits, online_name
from queueguard.engine.online import apply, choose, orphans
from queueguard.pg.connect import connect
from queueguard.sets import MigrationSet


@dataclass
class Aborted:
    revision: str | None = None
    statement: int | None = None
    undone: list[str] = field(default_factory=list)
    #: sub-forms of a split ALTER TABLE that committed before the one in flight: they stay,
    #: and a rerun finishes the statement from there
    kept: list[str] = field(default_factory=list)


def abort(
    mset: MigrationSet,
    dsn: str,
    limits: Limits | None = None,
    tell: Callable[[str], None] = lambda _: None,
) -> Aborted:
    limits = limits or Limits()
    orphans.settle(dsn, tell)
    conn = connect(dsn, application_name=online_name(), autocommit=True)
    try:
        runner_lock.take_for_statement(conn, limits.runner_wait_s, restart=conn.rollback)
        conn.execute(f"SET lock_timeout = {limits.lock_timeout_ms}")
        flight = progress.in_flight(conn)
        if flight is None:
            return Aborted()
        revision, index, text, step = flight
        forms = apply.decode(text)
        result = Aborted(revision, index)
        result.kept = [f.sql for f in forms[:step]]
        for form in reversed(forms[step:]):
            if form.kind == choose.PLAIN:
                continue  # ran in one transaction with its end: not begun
            result.undone += apply.module(form.kind).abort(conn, form)
        rev = mset.get(revision)
        with conn.transaction():
            if step > 0:
                pass  # the statement is part done: a rerun finishes it from there
            elif index == 0:
                progress.clear(conn, rev)
            else:
                progress.write(conn, rev, index)  # done up to it, nothing in flight
        return result
    finally:
        conn.close()
