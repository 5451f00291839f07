"""The online path's control behaviour, probed on scratch copies (`queueguard verify`'s
`online` check): what a quiescent end-state comparison cannot see.

- `Fleet` (during the compared run): a v0.4 host holds one queue, a v0.3 host loaded another;
  contract must fence the second and leave the first alone (a fleet on v0.4 goes on); a queue
  the v0.4 host loads after contract closed the window, before contract's last move, must not
  trust its own counter;
- `probe` (a second copy): after expand, the window is [3, 4], the marker index serves the
  directive batches and the remaining counts are right; a v0.4-held queue refuses a v0.3 load,
  other queues do not; one migrator at a time (busy while held or mid-batch, taken over once
  expired, released at the end); the rollout record counts what migrate did; abort waits for
  a load in flight, refuses while a v0.4 host of this database is connected (not of another),
  then fences only v0.4-held queues and returns to [3, 3], the previous catalog and every task.

The probe's checks live beside it: `probe_expand`, `probe_migrator` (the lease, the rollout
record), `probe_abort`; what they share (queues, knobs, the other schema): `probe_common`.
"""

from __future__ import annotations

import time

from queueguard.core.store import QueueState
from queueguard.engine import catalog
from queueguard.pg.connect import connection
from queueguard.queue_schema.legacy.workers import V03Worker
from queueguard.queue_schema.online import phases
from queueguard.queue_schema.online.between import Between
from queueguard.queue_schema.online.probe_abort import (
    abort_interrupted_expand,
    abort_refusals,
    aborted,
)
from queueguard.queue_schema.online.probe_common import (
    CLOSING,
    FREE,
    HELD,
    KNOBS,
    NAMESPACE,
    Export,
    drop_other_schema,
    other_schema,
    quiet,
    range_of,
    wait_gone,
)
from queueguard.queue_schema.online.probe_expand import (
    expand_beside_another_build,
    expanded,
    failed_build,
    window,
)
from queueguard.queue_schema.online.probe_migrator import lease, progress
from queueguard.queue_schema.online.report import OnlineReport
from queueguard.queue_schema.online.session import Session, statements
from queueguard.queue_schema.online.watch import Watch
from queueguard.revisions import SetFacts
from queueguard.stores.postgres import PostgresStore

# NAMESPACE lives in probe_common; verify imports it from here with Fleet and probe
__all__ = ["NAMESPACE", "Fleet", "probe"]


class Fleet:
    """A v0.4 host holding HELD and a v0.3 host that loaded FREE, around contract; the v0.4
    host also loads CLOSING right after contract closed the window (`tell`)."""

    def __init__(self, dsn: str) -> None:
        self.dsn = dsn
        self.host = PostgresStore(dsn, host_id="verify-fleet", pool_size=1, create_schema=False)
        self.held = self.host.load_queue(HELD)
        self.closing: QueueState | None = None
        with V03Worker(dsn, host_id="verify-fleet") as old:
            old.start()
            self.free = old.load(FREE)

    def tell(self, message: object) -> None:
        """online.run's progress: once the window is closed, contract still moves what v0.3
        hosts wrote into default queues, so a queue loaded now must not trust its counter."""
        if str(message).startswith("contract: window closed"):
            self.closing = self.host.load_queue(CLOSING)

    def problems(self) -> list[str]:
        """After contract (closes the v0.4 host)."""
        self.host.close()
        found = []
        if self.closing is None:
            found.append("contract never reported closing the window")
        elif not self.closing.shared:
            found.append(
                "a queue loaded after contract closed the window (its moves still to come) "
                "trusts its own counter: rows contract moves into it would be stranded"
            )
        if range_of(self.dsn, HELD.key) != self.held.range_id:
            found.append("contract fenced a queue a v0.4 host holds")
        if range_of(self.dsn, FREE.key) != self.free.range_id + 1:
            found.append("contract did not fence (exactly once) a queue a v0.3 host holds")
        return found


def probe(dsn: str, migrations: SetFacts, export: Export) -> list[str]:
    """Problems found on `dsn` (a scratch copy at the online path's starting revision; the
    probe writes to it)."""
    target = migrations.head.id
    sql = statements(migrations, target)
    with connection(dsn) as conn:
        before_catalog = catalog.introspect(conn)
    before_doc = export(dsn)
    problems: list[str] = []
    ceiling = migrations.head.online_locks
    watch = Watch(dsn, target, ceiling)
    session = Session(dsn, target=target, sql=sql, knobs=KNOBS, ceiling=ceiling, watch=watch)
    held: QueueState | None = None
    report = OnlineReport(target, None, None)
    other_schema(dsn)
    try:
        problems += abort_interrupted_expand(dsn, session, migrations, before_catalog)
        failed_build(dsn)
        refused = expand_beside_another_build(dsn, session, migrations, report)
        if refused:
            return problems + refused
        problems += expanded(dsn, session, before_doc)
        host = PostgresStore(dsn, host_id="verify-probe", pool_size=1, create_schema=False)
        try:
            problems += window(dsn, host)
            held = host.queue_state(HELD)
            problems += lease(dsn, sql, target, session)
            between = Between(dsn, NAMESPACE)
            between.start()
            started = time.monotonic()
            phases.migrate(session, report, between)
            took = time.monotonic() - started - between.spent_s  # the observer's reads aside
            problems += between.problems
            if not between.boundaries:
                problems.append("migrate reported no batch: nothing was checked between batches")
            problems += progress(dsn, report, migrations, took, session.holder)
        finally:
            host.close()
            wait_gone(dsn, host.application_name)
        problems += abort_refusals(dsn, session, report)
        phases.abort(session, report, quiet, force=False)
    finally:
        session.close()
        drop_other_schema(dsn)
    return problems + aborted(dsn, held, before_catalog, before_doc, export)
