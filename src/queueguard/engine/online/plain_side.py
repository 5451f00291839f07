"""The proof's plain side: the pending versions applied plain, as `upgrade` applies them, on
a clone of the sample, in a thread of its own (the online side runs beside it).

It depends on nothing `plan` decides, so for a set of SQL revisions it starts as soon as the
sample is built and runs beside `plan` (`early`): on a sample of 100 k rows both are the
server rewriting and indexing a copy of its own, and one after the other they added up in
every run. When nothing goes online after all, it is stopped (its database dropped under
it). A set with Python revisions (Alembic's env.py, Django's migrate) starts it with the
online side, as before: those runs take turns in one process anyway, and plan's may render
revisions as SQL that the plain side must run through their tool."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor

from queueguard.engine.apply import runner
from queueguard.pg.connect import connection
from queueguard.pg.scratch import ScratchDatabases
from queueguard.sets import MigrationSet, Revision, temporal


def take_over(mset: MigrationSet, copy: str, source_db: str) -> None:
    """Temporal keys its version row on the database's name: a copy takes over its
    source's."""
    if mset.format == "temporal":
        with connection(copy) as conn:
            temporal.take_over_version(conn, source_db)
            conn.commit()


class PlainSide:
    """The plain upgrade of a clone of `base` running in a thread; `result()` its DSN once
    it ended (its error, if it failed)."""

    def __init__(
        self, databases: ScratchDatabases, base: str, mset: MigrationSet, to: str | None
    ) -> None:
        self._databases = databases
        self.dsn = databases.create(template=base)
        take_over(mset, self.dsn, base)
        self._pool = ThreadPoolExecutor(max_workers=1)
        self._run: Future[object] = self._pool.submit(runner.upgrade, mset, self.dsn, to=to)
        self.taken = False

    def result(self) -> str:
        self.taken = True
        try:
            self._run.result()
        finally:
            self._pool.shutdown()
        return self.dsn

    def discard(self) -> None:
        """Stop it where it is: its database dropped under it (its sessions ended with it),
        its thread waited for and its error, which that causes, ignored."""
        if not self._run.done():
            self._databases.drop(self.dsn)
        with contextlib.suppress(Exception):
            self._run.result()
        self._pool.shutdown()


@contextlib.contextmanager
def early(
    databases: ScratchDatabases,
    base: str,
    mset: MigrationSet,
    to: str | None,
    pending: Sequence[Revision],
) -> Iterator[PlainSide | None]:
    """The plain side started now when `pending` (the revisions to apply) are all SQL, else
    None; stopped on the way out unless its result was taken."""
    if not pending or any(r.statements is None for r in pending):
        yield None
        return
    side = PlainSide(databases, base, mset, to)
    try:
        yield side
    finally:
        if not side.taken:
            side.discard()
