"""The four phases of 004's online path: expand, migrate, contract, abort.

expand   the guard (the offline guard's audit checks), then additive state in short
         transactions: the rollout record, protocol4_range and its check constraint, the
         marker index; stale counters repaired; finally the protocol window [3, 4]. Version
         table: still 003.
migrate  counters, @auto relocation, directives: batches (batches.py). Never waits for a host.
contract refuses while protocol-3 hosts are connected (unless forced); closes the window to
         [4, 4] and fences every queue not held by a protocol-4 host in one transaction
         (runtime_protocol locked first), migrates what v0.3 hosts wrote since, drops the
         marker index, then records 004 and the ledger and drops the rollout record.
abort    before contract closed the window: fence what protocol-4 hosts hold, back to [3, 3],
         drop the additive state. Migrated rows stay (valid for v0.3 hosts).
"""

from __future__ import annotations

from typing import Any

from queueguard.engine import topology
from queueguard.engine.apply import runner_lock
from queueguard.errors import (
    AlreadyApplied,
    HostsConnected,
    MigrationError,
    MigrationRefused,
    RolloutRefused,
)
from queueguard.pg.sqlfiles import queries
from queueguard.queue_schema import audit, manifest
from queueguard.queue_schema.online import batches
from queueguard.queue_schema.online.report import OnlineReport, Tell
from queueguard.queue_schema.online.session import Cursor, Session
from queueguard.revisions import SetFacts
from queueguard.stores import schema

UPGRADE = queries("queueguard.queue_schema", "upgrade.sql")
#: what comes next, by where the rollout stands
NEXT = {
    "expand": "expand was interrupted: rerun `queueguard upgrade --online` to finish it",
    "migrate": "v0.4 hosts may start now: roll hosts one at a time, then run `queueguard "
    "upgrade --online` (migrate, then contract once no v0.3 host is left)",
    "contract": "stop or roll the last v0.3 hosts, then run `queueguard upgrade --online` "
    "(contract)",
    "closing": "contract was interrupted after closing the window: rerun `queueguard upgrade "
    "--online` to finish it",
    "aborting": "abort was interrupted: rerun `queueguard upgrade --online --phase abort`",
    "done": "the database is at the target revision; run VACUUM (ANALYZE) on tasks and task_queues",
    "aborted": "back at the previous revision with protocol window [3, 3]: v0.3 hosts only; "
    "migrated rows stay (valid for v0.3)",
}


def current_phase(session: Session) -> str | None:
    """The rollout's phase, or None when no rollout is in progress."""
    return session.read(lambda cursor: _phase(cursor, session.target))


def _phase(cursor: Cursor, target: str) -> str | None:
    cursor.execute("SELECT to_regclass('queueguard_rollout') IS NOT NULL")
    if not cursor.fetchone()[0]:  # type: ignore[index]
        return None
    cursor.execute("SELECT phase FROM queueguard_rollout WHERE target = %s", (target,))
    row = cursor.fetchone()
    return str(row[0]) if row else None


def _set_phase(session: Session, cursor: Cursor, phase: str, *from_phases: str) -> None:
    cursor.execute(
        session.q("rollout.set_phase"),
        {
            "phase": phase,
            "from_phases": list(from_phases),
            "target": session.target,
            "holder": session.holder,
        },
    )
    if cursor.rowcount != 1:
        raise MigrationError(f"could not hand the rollout over to {phase} (lease lost?)")


def _revision(session: Session) -> str | None:
    return session.read(lambda cursor: schema.read_state(cursor).revision)


# expand ---------------------------------------------------------------------------------
def expand(session: Session, migrations: SetFacts, report: OnlineReport, tell: Tell) -> None:
    target = session.target
    previous = migrations.previous(target)
    if current_phase(session) is None:
        revision = _revision(session)
        if revision == target:
            return
        if revision != previous:
            raise RolloutRefused(
                f"the online path goes from {previous} to {target}, the database is at "
                f"{revision}: run `queueguard upgrade --to {previous}` first"
            )
        _guard(session, migrations)
        session.transaction(
            lambda cursor: create_record(session, cursor, previous), phases=None, what="expand"
        )
        tell(f"expand: rollout to {target} recorded (version table stays at {previous})")
    if current_phase(session) != "expand":
        return
    expanding = ("expand",)

    session.transaction(
        lambda cursor: cursor.execute(session.q("expand.owner")),
        phases=expanding,
        what="expand: owner column",
    )
    tell("expand: task_queues.protocol4_range and check queue_owned_by_protocol_4 in place")
    valid = session.read(lambda c: c.execute(session.q("expand.marker_index_state")).fetchone())
    if valid is not None and not valid[0]:  # a build that failed half-way: build it again
        building = session.read(
            lambda c: c.execute(session.q("expand.marker_index_building")).fetchall()
        )
        if building:  # not failed: still running, for a migrator whose lease expired
            pids = ", ".join(str(r[0]) for r in building)
            raise RolloutRefused(
                f"expand: another migrator is still building the marker index (pid {pids}); "
                "rerun when it has finished"
            )
        session.transaction(lambda _c: None, phases=expanding, what="expand: lease")
        session.autocommit(session.q("rollout.drop_marker_index"), "expand: drop a failed build")
        valid = None
    if valid is None:
        session.transaction(lambda _c: None, phases=expanding, what="expand: lease")
        tell("expand: building the marker index (CONCURRENTLY: writers go on)")
        session.autocommit(session.q("expand.marker_index"), "expand: marker index")

    # Stale legacy counters (last_task_id below the highest stored id) make the next append
    # collide, for v0.3 and v0.4 hosts alike: repair them before v0.4 hosts may start.
    batches.repair_counters(session, "expand", expanding, report, tell)

    def open_window(cursor: Cursor) -> None:
        cursor.execute(session.q("rollout.lock_protocol"))
        cursor.execute(session.q("expand.open_window"))
        _set_phase(session, cursor, "migrate", "expand")

    session.transaction(open_window, phases=expanding, what="expand: open the window")
    report.phases.append("expand")
    tell("expand: protocol window [3, 4]: v0.4 hosts may start")


def _guard(session: Session, migrations: SetFacts) -> None:
    """The offline guard's blocking audit checks, read-only (nothing is locked beyond
    ACCESS SHARE): expand refuses as offline 004 would, before writing anything."""
    facts = migrations.get(session.target)
    queries_ = audit.for_revision(facts.down_revision or "")

    def check(cursor: Cursor) -> list[Any]:
        audit.set_local(cursor, target=facts.id, protocol=facts.protocol)
        blocking: list[Any] = []
        for query in queries_:
            blocking += [f for f in audit.run(cursor, query) if f.blocking]
            if blocking and query.kind == "schema":
                break
        return blocking

    blocking = session.read(check)
    if blocking:
        raise MigrationRefused(facts.id, blocking)


def create_record(session: Session, cursor: Cursor, previous: str | None) -> None:
    """The rollout record, under the offline runner's lock with the version re-read: an
    offline upgrade and an online expand never interleave."""
    runner_lock.take(cursor, session.knobs.wait_s)
    cursor.execute(f"SET LOCAL lock_timeout = {session.knobs.lock_timeout_ms}")
    cursor.execute(UPGRADE["current_version"])
    found = [str(r[0]) for r in cursor.fetchall()]
    if found != [previous]:
        raise AlreadyApplied(session.target, ", ".join(found) or None)
    cursor.execute(session.q("rollout.table"))
    cursor.execute(session.q("rollout.create"), {"target": session.target})


# migrate --------------------------------------------------------------------------------
def migrate(session: Session, report: OnlineReport, tell: Tell) -> None:
    phase = current_phase(session)
    if phase in ("contract", "closing") or (phase is None and _revision(session) == session.target):
        return
    if phase != "migrate":
        raise RolloutRefused(_not_due("migrate", phase))
    migrating = ("migrate",)
    directives, relocations = batches.remaining(session)
    tell(f"migrate: {directives} rows need their directive, {relocations} rows in @auto queues")
    batches.repair_counters(session, "migrate", migrating, report, tell)
    batches.relocate(session, "migrate", migrating, report, tell, fence=True)
    batches.directives(session, "migrate", migrating, report, tell, passes=3, total=directives)
    batches.relocate(session, "migrate", migrating, report, tell, fence=True)  # v0.3's since
    session.transaction(
        lambda cursor: _set_phase(session, cursor, "contract", "migrate"),
        phases=migrating,
        what="migrate: hand over",
    )
    report.phases.append("migrate")
    left, auto = batches.remaining(session)
    tell(f"migrate: done ({left} rows without directive, {auto} in @auto left for contract)")


def _not_due(wanted: str, phase: str | None) -> str:
    where = f"phase {phase}" if phase else "no rollout in progress"
    hint = NEXT.get(phase or "", "start it with `queueguard upgrade --online`")
    return f"{wanted} is not due ({where}): {hint}"


# contract -------------------------------------------------------------------------------
def contract(
    session: Session,
    migrations: SetFacts,
    report: OnlineReport,
    tell: Tell,
    *,
    force: bool,
    pooled: bool,
) -> None:
    phase = current_phase(session)
    if phase is None and _revision(session) == session.target:
        return
    if phase not in ("contract", "closing"):
        raise RolloutRefused(_not_due("contract", phase))
    facts = migrations.get(session.target)
    if phase == "contract":
        if not force:
            hosts = session.read(
                lambda c: audit.older_hosts(c, target=facts.id, protocol=facts.protocol or 0)
            )
            if hosts:
                raise HostsConnected("contract", (facts.protocol or 1) - 1, hosts)
        why = session.read(lambda c: topology.pooler(session.conn, c, pooled))
        if why is not None:
            report.warnings.append(f"through a pooler ({why}): {topology.POOLER_BLIND}")

        def close(cursor: Cursor) -> int:
            cursor.execute(session.q("rollout.lock_protocol"))
            cursor.execute(session.q("contract.close_window"))
            cursor.execute(session.q("contract.fence_protocol3"))
            fenced = cursor.rowcount
            cursor.execute(session.q("rollout.drop_owner"))
            _set_phase(session, cursor, "closing", "contract")
            return fenced

        report.queues_fenced = session.transaction(close, phases=("contract",), what="contract")
        tell(f"contract: window closed to [4, 4], {report.queues_fenced} queues fenced")
    closing = ("closing",)
    batches.repair_counters(session, "contract", closing, report, tell)
    batches.relocate(session, "contract", closing, report, tell, fence=False)
    # One pass: v0.4 hosts may go on adding rows without a directive (History gives it at
    # dispatch), so "none left" is not a state contract can wait for.
    batches.directives(session, "contract", closing, report, tell, passes=1)
    _, auto = batches.remaining(session)
    if auto:  # nothing writes @auto once the window is closed and its owners fenced
        raise MigrationError(f"contract: {auto} rows still in @auto queues; rerun to retry")
    session.transaction(lambda _c: None, phases=closing, what="contract: lease")
    session.autocommit(session.q("rollout.drop_marker_index"), "contract: drop the marker index")

    def record(cursor: Cursor) -> None:
        runner_lock.take(cursor, session.knobs.wait_s)
        cursor.execute(f"SET LOCAL lock_timeout = {session.knobs.lock_timeout_ms}")
        cursor.execute(session.q("contract.ledger_table"))
        for rev in migrations.ids[: migrations.ids.index(facts.id) + 1]:
            sha = manifest.revision_sha256(rev, migrations.root)
            cursor.execute(session.q("contract.ledger_row"), {"revision": rev, "sha256": sha})
        cursor.execute(
            session.q("contract.record_version"),
            {"target": facts.id, "previous": facts.down_revision},
        )
        if cursor.rowcount != 1:
            raise MigrationError(f"contract: {facts.id} could not be recorded; nothing changed")
        cursor.execute(session.q("rollout.drop_table"))

    session.transaction(record, phases=closing, what="contract: record")
    report.phases.append("contract")
    tell(f"contract: revision {facts.id} recorded, rollout record removed")


# abort ----------------------------------------------------------------------------------
def abort(session: Session, report: OnlineReport, tell: Tell, *, force: bool) -> None:
    phase = current_phase(session)
    if phase is None:
        raise RolloutRefused("abort: no online rollout in progress")
    if phase == "closing":
        raise RolloutRefused(
            "abort: contract already closed the window to [4, 4]; finish the rollout with "
            "`queueguard upgrade --online`"
        )
    if phase != "aborting":
        if not force:
            hosts = session.read(
                lambda c: [
                    str(r[0])
                    for r in c.execute(session.q("rollout.hosts_of_protocol"), {"protocol": 4})
                ]
            )
            if hosts:
                raise HostsConnected("abort", 4, hosts)

        def reopen(cursor: Cursor) -> int:
            cursor.execute(session.q("rollout.lock_protocol"))
            cursor.execute(session.q("abort.reopen_v03"))
            cursor.execute(session.q("rollout.owner_column_exists"))
            fenced = 0
            if cursor.fetchone()[0]:  # type: ignore[index]
                cursor.execute(session.q("abort.fence_protocol4"))
                fenced = cursor.rowcount
            cursor.execute(session.q("rollout.drop_owner"))
            _set_phase(session, cursor, "aborting", "expand", "migrate", "contract")
            return fenced

        report.queues_fenced = session.transaction(
            reopen, phases=("expand", "migrate", "contract"), what="abort"
        )
        tell(f"abort: window back to [3, 3], {report.queues_fenced} protocol-4 queues fenced")
    session.transaction(lambda _c: None, phases=("aborting",), what="abort: lease")
    session.autocommit(session.q("rollout.drop_marker_index"), "abort: drop the marker index")
    session.transaction(
        lambda c: c.execute(session.q("rollout.drop_table")),
        phases=("aborting",),
        what="abort: drop the rollout record",
    )
    report.phases.append("abort")
    tell("abort: rollout record removed")
