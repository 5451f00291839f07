"""Scenario 12's model (`bench/failover/scenario.py`): its input, kill points and rounds, and how a
database after a failover is judged (payloads, the head's invariants)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from bench.common.databases import create_database, query
from bench.common.fingerprints import upgrade_state
from bench.common.ledger import Outcome
from bench.common.v3_database import first_step_at, seed_v3
from bench.topology.patroni import Failover, PatroniCluster
from queueguard import revisions
from queueguard.pg.connect import connection
from queueguard.queue_schema import audit
from queueguard.queue_schema.runner import upgrade

CI_TEST = (
    "`tests/topology/test_failover.py` (2 failovers: synchronous, mid-004, through PgBouncer; "
    "asynchronous, at the commit, replica stopped)"
)
INPUT = "qg_failover_003"
#: 004's steps as the upgrade reports them (each line when the step ended), in order. The
#: bench kills up to 0.5 s after any of them; the CI test after one of the first four (plus
#: a fraction of a second), well before the commit.
STEPS = (
    "004 00_locks",
    "004 guard",
    "004 01_plan",
    "004 02_directives",
    "004 03_relocate",
    "004 04_repair_counters",
    "004 05_fence",
    "004 06_migration_ledger",
)
LOST_LINE = "lost the server"

PAYLOADS = (
    "SELECT count(*), md5(string_agg(d, '|' ORDER BY d)) "
    "FROM (SELECT (data #- '{task,versionDirective}')::text AS d FROM tasks) s"
)
INVARIANTS = {
    "tasks without data.task.versionDirective": (
        "SELECT count(*) FROM tasks WHERE NOT (data -> 'task' ? 'versionDirective')"
    ),
    "task rows left in @auto queues": (
        "SELECT count(*) FROM tasks WHERE physical_queue LIKE '%@auto'"
    ),
    "queues whose counter is below their highest task id": (
        "SELECT count(*) FROM task_queues q WHERE q.last_task_id < (SELECT "
        "coalesce(max(t.task_id), 0) FROM tasks t WHERE t.physical_queue = q.physical_queue)"
    ),
}


@dataclass
class Input:
    """The 003 database every round upgrades a clone of, and what the upgrade must give."""

    template: str  # database name on the cluster
    rows: int
    before: dict[str, Any]  # upgrade_state of the 003 input
    golden: dict[str, Any]  # upgrade_state of an uninterrupted upgrade of a clone
    payloads: list[Any]  # the multiset of task payloads (beside the directive 004 adds)
    first_step_s: float  # the uninterrupted run: 004's first step reported after …
    full_s: float  # … and the process exited after


@dataclass(frozen=True)
class KillPoint:
    """Kill the leader `delay` seconds after the upgrade reported the first line starting
    with `after` (a step of 004)."""

    after: str
    delay: float

    def __str__(self) -> str:
        if self.after == "commit":
            return "at 004's commit (the replica's WAL receiver stopped)"
        return f"{self.delay:.2f} s after '{self.after}'"


COMMIT_POINT = KillPoint("commit", 0.0)
#: WAL written after the replica's receiver stopped and before the upgrade starts: more than
#: the loopback socket buffers hold (a few MB, still delivered after the sender dies), so
#: 004's commit record cannot reach the replica. Committed without waiting for a replica.
FILLER = """
SET synchronous_commit = local;
CREATE TABLE qg_failover_filler (v text);
INSERT INTO qg_failover_filler SELECT repeat(md5(i::text), 59) FROM generate_series(1, 25000) i;
DROP TABLE qg_failover_filler;
"""
SYNC_REP_WAITERS = (
    "SELECT count(*) FROM pg_stat_activity "
    "WHERE wait_event = 'SyncRep' AND application_name = 'queueguard-upgrade'"
)


@dataclass
class Round:
    number: int
    synchronous: bool
    via: str  # "pgbouncer" or "leader"
    kill: KillPoint
    phase: str = ""  # the last step the upgrade reported before the kill
    lag_bytes: int = 0  # WAL the leader had written and the replica not received, at the kill
    upgrade_rc: int | None = None
    error: str = ""  # the interrupted upgrade's error line
    state: str = ""  # the new primary's revision after the failover
    failover: Failover | None = None
    rerun_rc: int | None = None
    rerun_s: float = 0.0
    rejoin_s: float = 0.0
    outcome: Outcome | None = None
    produced_after: int = 0  # acknowledged appends after PgBouncer was repointed
    lost_starts: int = 0  # asynchronous: committed tasks History does not show started
    lost_after: int = 0  # appends acknowledged after the repoint and never started
    orphaned_after: int = 0  # … whose History rows the failover lost (answered obsolete)
    starts_lost_delivered: int = 0  # of lost_starts: handed to a worker before the failover
    violations: list[str] = field(default_factory=list)

    @property
    def mode(self) -> str:
        return "synchronous" if self.synchronous else "asynchronous"

    def as_json(self) -> dict[str, Any]:
        o = self.outcome
        return {
            "round": self.number,
            "mode": self.mode,
            "via": self.via,
            "kill": str(self.kill),
            "phase": self.phase,
            "lag_bytes": self.lag_bytes,
            "upgrade_rc": self.upgrade_rc,
            "state": self.state,
            "promoted_s": round(self.failover.promoted_s, 2) if self.failover else None,
            "repointed_s": round(self.failover.repointed_s, 2) if self.failover else None,
            "rerun_rc": self.rerun_rc,
            "rejoin_s": round(self.rejoin_s, 1),
            "produced": o.produced if o else None,
            "produced_after_failover": self.produced_after,
            "lost": o.lost if o else None,
            "lost_starts": self.lost_starts,
            "lost_after_failover": self.lost_after,
            "history_lost_after_failover": self.orphaned_after,
            "lost_starts_delivered": self.starts_lost_delivered,
            "violations": self.violations[:10],
        }


# -- the input ---------------------------------------------------------------------------------
def payloads(dsn: str) -> list[Any]:
    return list(query(dsn, PAYLOADS)[0])


def head_problems(dsn: str, expected_payloads: list[Any]) -> list[str]:
    """What is wrong with `dsn` as a database at head: the invariants above, the protocol,
    the payloads carried over, and the blocking findings of the head revision's audit."""
    problems = [f"{what}: {n}" for what, sql in INVARIANTS.items() if (n := query(dsn, sql)[0][0])]
    protocol = query(dsn, "SELECT min_protocol, max_protocol FROM runtime_protocol")
    if protocol != [(4, 4)]:
        problems.append(f"runtime_protocol is {protocol}, not [(4, 4)]")
    if payloads(dsn) != expected_payloads:
        problems.append("the task payloads are not those of the input (count, digest)")
    head = revisions.packaged().head
    with connection(dsn) as conn, conn.cursor() as cursor:
        audit.set_local(cursor, target=head.id, protocol=head.protocol)
        for check in audit.for_revision(head.id):
            problems += [str(f) for f in audit.run(cursor, check) if f.blocking]
        conn.rollback()
    return problems


def clone(cluster: PatroniCluster, template: str, name: str) -> str:
    query(cluster.leader_dsn(), f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    query(cluster.leader_dsn(), f'CREATE DATABASE "{name}" TEMPLATE "{template}"')
    return name


def prepare_input(cluster: PatroniCluster, rows: int) -> Input:
    """The 003 input on the cluster's leader, and the golden state of its upgrade."""
    dsn = create_database(cluster.leader_dsn(), INPUT)
    upgrade(dsn, to="003", progress=False)
    seed_v3(dsn, rows)
    before, carried = upgrade_state(dsn), payloads(dsn)
    reference = cluster.leader_dsn(clone(cluster, INPUT, "qg_failover_reference"))
    first, full = first_step_at(reference)
    golden = upgrade_state(reference)
    problems = head_problems(reference, carried)
    assert not problems, problems
    query(cluster.leader_dsn(), 'DROP DATABASE "qg_failover_reference"')
    return Input(INPUT, before["tasks"][0], before, golden, carried, first, full)


@dataclass
class Result:
    rows: int
    input: Input
    rounds: list[Round]
    elapsed_s: float

    def violations(self) -> list[str]:
        return [f"round {r.number}: {v}" for r in self.rounds for v in r.violations]
