"""Chaos scenario 12: the leader fails over during an upgrade (Patroni, PgBouncer in front).

A two-node Patroni cluster (`bench/topology/patroni.py`: etcd on loopback, Debian's
PostgreSQL 15, PgBouncer in transaction pooling repointed by an `on_role_change` callback).
A 003 database of `--rows` task rows (`bench/chaos/v3_database.py`) is built once on the
cluster; an uninterrupted upgrade of a clone gives the golden 004 state.
Then, `--failovers` times:

1. two v0.4 host processes (`bench/chaos/host.py`: producers and consumers, every confirmed
   append logged) run through PgBouncer on a database of their own;
2. `queueguard upgrade` migrates a fresh clone of the 003 database, through PgBouncer or
   straight to the leader (alternately);
3. the leader's node dies (its Patroni agent and its postmaster with every child, SIGKILL)
   up to 0.5 s after one of 004's steps, drawn at random (the steps are reported as they
   end; after the last one the commit follows, so a kill may come before or after it);
4. checks: the interrupted upgrade exits 2 with one line on stderr (no traceback) saying it
   lost the server during revision 004 — or 0 when it finished first; Patroni promotes the
   replica and PgBouncer follows; the new primary is wholly at 003 (every table as before)
   or wholly at 004 (the golden state); `queueguard upgrade` rerun against the new primary
   (the same DSN through PgBouncer, the new leader's otherwise) reaches the golden state and
   the head invariants; the hosts keep producing after the failover; once drained, every
   append a producer saw acknowledged was started (synchronous mode), or the acknowledged
   appends the failover lost are counted (asynchronous mode: reported, not judged) — but in
   either mode every append acknowledged after the failover was started, and every task
   History does not show started had been handed to a worker before it (else the runtime,
   not the replication, lost it);
5. the dead node rejoins as a replica (pg_rewind, or a new clone) for the next round.

The first half of the rounds runs with Patroni's `synchronous_mode`, the rest without. Two
more rounds (`COMMIT_POINT`: one per mode) kill the leader at 004's commit with the
replica's WAL receiver stopped beforehand (`upgrade_at_commit`): in synchronous mode the
commit (and the hosts' appends) wait for the replica, the runner must exit 2 and the new
primary be at 003, and no acknowledged append may be lost; in asynchronous mode the runner
exits 0 at 004 and the new primary is at 003 all the same, with the appends acknowledged
since the replica stopped: lost, as asynchronous replication allows (counted). Either way
the rerun must reach the golden state.

    python -m bench.failover                 # 10 + 2 failovers, 100k rows, writes the docs
    python -m bench.failover --failovers 2 --rows 20000 --no-docs
"""

from __future__ import annotations

import argparse
import contextlib
import json
import random
import re
import shutil
import subprocess
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg

from bench.chaos.audit import install_audit
from bench.chaos.databases import create_database, query
from bench.chaos.fingerprints import upgrade_state
from bench.chaos.host import HostConfig
from bench.chaos.host_process import HostProcess, reap
from bench.chaos.ledger import Outcome, drain_and_judge
from bench.chaos.report import record, say, seconds
from bench.chaos.v3_database import seed_v3
from bench.chaos.workload import queues_for, rng
from bench.chaos_upgrade_kill import first_step_at
from bench.commands import QUEUEGUARD
from bench.topology.patroni import Failover, PatroniCluster, available
from queueguard import revisions
from queueguard.pg.connect import connection
from queueguard.upgrade import audit
from queueguard.upgrade.runner import upgrade

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


# -- the runtime traffic -----------------------------------------------------------------------
class Traffic:
    """Host processes producing and consuming through PgBouncer on a database of their own
    (`PostgresStore(prepare=False, create_schema=False)`, the schema made beforehand)."""

    def __init__(self, cluster: PatroniCluster, dbname: str, hosts: int = 2, queues: int = 2):
        self.cluster, self.dbname = cluster, dbname
        self.names = [f"h{i}" for i in range(hosts)]
        self.queues = queues_for(self.names, queues, family="failover")
        self.folder = Path(tempfile.mkdtemp(prefix="qg-failover-"))
        self.procs: list[HostProcess] = []
        self.t0 = 0.0

    def start(self) -> Traffic:
        query(self.cluster.leader_dsn(), f'DROP DATABASE IF EXISTS "{self.dbname}" WITH (FORCE)')
        dsn = create_database(self.cluster.leader_dsn(), self.dbname)
        upgrade(dsn, progress=False)
        install_audit(dsn)
        for name in self.names:
            cfg = HostConfig(
                dsn=self.cluster.pgbouncer_dsn(self.dbname),
                prepare=False,
                create_schema=False,
                host=name,
                hosts=self.names,
                queues=[q.key for q in self.queues],
                folder=str(self.folder),
                backoff=(0.05, 1.0),
            )
            self.procs.append(HostProcess(cfg))
        for p in self.procs:
            p.start()
        for p in self.procs:
            p.wait_ready()
        self.t0 = time.time()
        return self

    def alive(self) -> list[str]:
        return [
            f"host {p.cfg.host} died: {p.stderr()}"
            for p in self.procs
            if p.proc is not None and p.proc.poll() is not None
        ]

    def produced_since(self, at: float) -> int:
        """Appends the producers saw acknowledged after `at` (epoch seconds)."""
        count = 0
        for path in self.folder.glob("*.log"):
            for line in path.read_text().splitlines():
                with contextlib.suppress(ValueError):
                    event = json.loads(line)
                    if event.get("e") == "produced" and event.get("t", 0) >= at:
                        count += 1
        return count

    def lost_since(self, at: float) -> tuple[int, int]:
        """Appends acknowledged after `at` (epoch seconds) and never started: (those whose
        History rows exist, lost by the runtime; those whose History rows the failover lost
        — created before it, appended after — which History answers as obsolete)."""
        started = {
            (str(run), event): bool(done)
            for run, event, done in query(
                self.cluster.leader_dsn(self.dbname),
                "SELECT run_id, scheduled_event_id, started_at IS NOT NULL FROM scheduled_tasks",
            )
        }
        lost = orphaned = 0
        for path in self.folder.glob("*.log"):
            for line in path.read_text().splitlines():
                with contextlib.suppress(ValueError):
                    event = json.loads(line)
                    if event.get("e") != "produced" or event.get("t", 0) < at:
                        continue
                    key = (event["run"], event["ev"])
                    if key not in started:
                        orphaned += 1
                    elif not started[key]:
                        lost += 1
        return lost, orphaned

    def unstarted(self) -> tuple[int, int, int]:
        """The committed task rows History does not show started, by cause: (their History
        rows are missing — the failover lost them, History answers obsolete; handed to a
        worker before the failover — their start was lost with it; neither: the runtime
        lost them)."""
        rows = query(
            self.cluster.leader_dsn(self.dbname),
            "SELECT a.run_id, a.scheduled_event_id, s.run_id IS NULL FROM chaos_task_audit a "
            "LEFT JOIN scheduled_tasks s ON s.run_id::text = a.run_id "
            "AND s.scheduled_event_id = a.scheduled_event_id WHERE s.started_at IS NULL",
        )
        delivered = set()
        for path in self.folder.glob("*.log"):
            for line in path.read_text().splitlines():
                with contextlib.suppress(ValueError):
                    event = json.loads(line)
                    if event.get("e") == "delivered":
                        delivered.add((event["run"], event["ev"]))
        missing = sum(1 for _, _, gone in rows if gone)
        handed = sum(1 for run, ev, gone in rows if not gone and (str(run), ev) in delivered)
        return missing, handed, len(rows) - missing - handed

    def finish(self, timeout: float = 120) -> Outcome:
        """Drain through the hosts, stop them and judge on the (new) leader."""
        window = (self.t0, time.time())
        dsn = self.cluster.leader_dsn(self.dbname)
        outcome, _ = drain_and_judge(self.procs, dsn, self.folder, window, timeout)
        return outcome

    def close(self) -> None:
        reap(self.procs)
        shutil.rmtree(self.folder, ignore_errors=True)


# -- one round ---------------------------------------------------------------------------------
class LagProbe:
    """How far the replica's received WAL is behind the leader's, in bytes (connections
    opened beforehand, so that a probe right before the kill takes a few milliseconds)."""

    def __init__(self, cluster: PatroniCluster) -> None:
        leader = cluster.leader()
        assert leader is not None
        self.leader = psycopg.connect(leader.dsn(), autocommit=True)
        self.replica = psycopg.connect(cluster.replica().dsn(), autocommit=True)

    def __call__(self) -> int:
        lsn = self.leader.execute("SELECT pg_current_wal_lsn()").fetchone()
        assert lsn is not None
        row = self.replica.execute(
            "SELECT pg_wal_lsn_diff(%s::pg_lsn, pg_last_wal_receive_lsn())", (lsn[0],)
        ).fetchone()
        return max(0, int(row[0])) if row and row[0] is not None else 0

    def close(self) -> None:
        for conn in (self.leader, self.replica):
            with contextlib.suppress(psycopg.Error):
                conn.close()


def upgrade_and_kill(
    cluster: PatroniCluster, dsn: str, point: KillPoint, r: Round
) -> tuple[int, list[str]]:
    """Run `queueguard upgrade --dsn dsn`, kill the leader's node at `point`; (exit code,
    stderr lines). Notes in `r` the last 004 step reported before the kill and the
    replica's lag then."""
    probe = LagProbe(cluster)
    proc = subprocess.Popen(
        [QUEUEGUARD, "upgrade", "--dsn", dsn],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    lines: list[str] = []
    seen = threading.Event()

    def follow() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            lines.append(line.rstrip("\n"))
            if line.strip().startswith(point.after):
                seen.set()

    reader = threading.Thread(target=follow, daemon=True)
    reader.start()
    try:
        while not seen.wait(0.05):
            if proc.poll() is not None and not reader.is_alive():
                break  # it finished (or failed) before the step: kill anyway, judge below
        time.sleep(point.delay)
        steps = [s.strip().split(":")[0] for s in lines if s.strip().startswith("004 ")]
        done = proc.poll() is not None
        r.phase = "after exit" if done else (steps[-1] if steps else "before 004")
        r.lag_bytes = probe()
        cluster.kill_leader_node()
    finally:
        probe.close()
    try:
        rc = proc.wait(120)
    except subprocess.TimeoutExpired:
        proc.kill()
        rc = proc.wait()
        lines.append("(the interrupted upgrade hung for 120 s after the kill: killed)")
    reader.join(10)
    return rc, lines


def judge_upgrade(r: Round, rc: int, lines: list[str], state: dict[str, Any], inp: Input) -> str:
    """The interrupted run's exit and output, and the new primary's state: '003' or '004'."""
    errors = [line for line in lines if line.startswith("queueguard: error:")]
    r.error = errors[0] if errors else ""
    text = "\n".join(lines)
    if "Traceback" in text:
        r.violations.append(f"the interrupted upgrade printed a traceback:\n{text[-2000:]}")
    if rc == 2:
        if len(errors) != 1 or LOST_LINE not in errors[0]:
            r.violations.append(f"exit 2 without one '{LOST_LINE}' error line:\n{text[-1500:]}")
    elif rc != 0:
        r.violations.append(f"the interrupted upgrade exited {rc}:\n{text[-1500:]}")
    if state == inp.before:
        found = "003"
    elif state == inp.golden:
        found = "004"
    else:
        found = "mixed"
        r.violations.append("the new primary is neither wholly at 003 nor at the golden 004")
    if rc == 0 and found != "004" and r.synchronous:
        r.violations.append("the upgrade reported success, the new primary is not at 004")
    return found


def run_round(
    cluster: PatroniCluster,
    inp: Input,
    number: int,
    *,
    synchronous: bool,
    via: str,
    point: KillPoint,
    after_s: float = 3.0,
    log: Any = say,
) -> Round:
    """One failover during an upgrade, with runtime traffic through PgBouncer (see the module
    docstring). The dead node has rejoined when it returns."""
    r = Round(number, synchronous, via, point)
    cluster.ensure_healthy()
    if cluster.synchronous != synchronous:
        cluster.set_synchronous(synchronous)
    target = clone(cluster, inp.template, f"qg_failover_{number}")
    traffic = Traffic(cluster, f"qg_failover_runtime_{number}")
    try:
        traffic.start()
        cluster.wait_replayed()
        dsn = cluster.pgbouncer_dsn(target) if via == "pgbouncer" else cluster.leader_dsn(target)
        time.sleep(1.0)  # the hosts at work before the upgrade starts
        if point == COMMIT_POINT:
            rc, lines = upgrade_at_commit(cluster, dsn, r)
        else:
            rc, lines = upgrade_and_kill(cluster, dsn, point, r)
        r.upgrade_rc = rc
        r.failover = failover = cluster.wait_for_new_leader(120)
        r.state = judge_upgrade(r, rc, lines, upgrade_state(cluster.leader_dsn(target)), inp)
        if point == COMMIT_POINT and synchronous and (rc, r.state) != (2, "003"):
            r.violations.append(f"killed at the synchronous commit: exit {rc}, at {r.state}")
        log(
            f"  round {number} ({r.mode}, upgrade via {via}): killed {failover.old} "
            f"{point} ({r.phase}, replica {r.lag_bytes:,} bytes behind); upgrade exit {rc}; "
            f"{failover.new} promoted in "
            f"{failover.promoted_s:.1f} s, PgBouncer repointed in {failover.repointed_s:.1f} s; "
            f"new primary at {r.state}"
        )
        rerun = cluster.pgbouncer_dsn(target) if via == "pgbouncer" else cluster.leader_dsn(target)
        started = time.monotonic()
        done = subprocess.run(
            [QUEUEGUARD, "upgrade", "--dsn", rerun], capture_output=True, text=True, timeout=600
        )
        r.rerun_rc, r.rerun_s = done.returncode, time.monotonic() - started
        if done.returncode != 0:
            r.violations.append(f"the rerun exited {done.returncode}: {done.stderr[-1500:]}")
        elif upgrade_state(cluster.leader_dsn(target)) != inp.golden:
            r.violations.append("the rerun did not reach the golden 004 state")
        r.violations += head_problems(cluster.leader_dsn(target), inp.payloads)
        repointed_at = (cluster.node(failover.old).killed_at or 0) + failover.repointed_s
        time.sleep(max(0.0, repointed_at + after_s - time.time()))
        r.violations += traffic.alive()
        r.produced_after = traffic.produced_since(repointed_at)
        if r.produced_after == 0:
            r.violations.append("the hosts acknowledged no append after the failover")
        r.outcome = outcome = traffic.finish()
        r.lost_after, r.orphaned_after = traffic.lost_since(repointed_at)
        missing, r.starts_lost_delivered, unexplained = traffic.unstarted()
        if unexplained:  # History knows them, nobody ran them: the runtime lost them
            r.violations.append(f"{unexplained} committed tasks never delivered nor started")
        if r.lost_after:  # the failover cannot explain these: the runtime lost them
            r.violations.append(
                f"{r.lost_after} appends acknowledged after the failover were never started"
            )
        problems = outcome.violations
        if not synchronous:  # losses are measured, not judged; other faults still count
            problems = [v for v in problems if not _async_loss(r, v)]
        r.violations += problems
        log(
            f"    runtime: {outcome.produced:,} acknowledged, {outcome.lost} lost "
            f"({r.orphaned_after} appended after the failover, their History lost by it; "
            f"{r.lost_after} lost by the runtime), {r.lost_starts} committed never started "
            f"({missing} History lost, {r.starts_lost_delivered} handed to a worker before), "
            f"{r.produced_after:,} acknowledged after the failover; rerun {r.rerun_s:.1f} s"
        )
    finally:
        traffic.close()
    started = time.monotonic()
    cluster.ensure_healthy()
    r.rejoin_s = time.monotonic() - started
    with contextlib.suppress(Exception):
        for name in (target, traffic.dbname):
            query(cluster.leader_dsn(), f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    return r


def upgrade_at_commit(cluster: PatroniCluster, dsn: str, r: Round) -> tuple[int, list[str]]:
    """Run `queueguard upgrade --dsn dsn` with the replica's WAL receiver stopped and WAL
    written beyond what the sockets buffer, and kill the leader's node at 004's commit:
    while the commit waits for the replica (synchronous mode) or once the runner exited
    (asynchronous mode: the commit was acknowledged). The replica resumes after the kill."""
    probe = LagProbe(cluster)
    frozen = cluster.freeze_replication()
    try:
        with connection(cluster.leader_dsn(), autocommit=True) as conn:
            conn.execute(FILLER)
        proc = subprocess.Popen(
            [QUEUEGUARD, "upgrade", "--dsn", dsn],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        deadline = time.monotonic() + 240  # within wal_sender_timeout (patroni.py: 5 min)
        while proc.poll() is None and time.monotonic() < deadline:
            if r.synchronous and query(cluster.leader_dsn(), SYNC_REP_WAITERS) != [(0,)]:
                break
            time.sleep(0.05)
        r.phase = "after exit" if proc.poll() is not None else "commit waiting for the replica"
        r.lag_bytes = probe()
        cluster.kill_leader_node()
    finally:
        probe.close()
        cluster.thaw_replication(frozen)
    _, err = proc.communicate(timeout=120)
    return proc.returncode, err.splitlines()


def _async_loss(r: Round, violation: str) -> bool:
    """Whether the judge's finding is one an asynchronous failover explains: acknowledged
    commits that never reached the replica. Appends lost (`lost: …`); History starts lost,
    so the task was started again (`started twice: …`) or, when the host's checkpoint after
    the failover moved its queue past it, never again (`… committed tasks never started`,
    counted in `r.lost_starts`)."""
    if violation.startswith(("lost: ", "started twice: ")):
        return True
    found = re.search(r": (\d+) committed tasks never started", violation)
    if found:
        r.lost_starts += int(found.group(1))
    return found is not None


# -- the scenario ------------------------------------------------------------------------------
@dataclass
class Result:
    rows: int
    input: Input
    rounds: list[Round]
    elapsed_s: float

    def violations(self) -> list[str]:
        return [f"round {r.number}: {v}" for r in self.rounds for v in r.violations]


def run(
    *,
    failovers: int = 10,
    rows: int = 100_000,
    commit_point: bool = True,
    seed: int | None = None,
    log: Any = say,
) -> Result:
    """`failovers` rounds at random moments of 004 (the first half in synchronous mode), then,
    with `commit_point`, one round killed at 004's commit in each mode."""
    rnd = rng(seed)
    started = time.monotonic()
    with PatroniCluster(synchronous=True) as cluster:
        log(f"  cluster up in {time.monotonic() - started:.1f} s; building the 003 input")
        inp = prepare_input(cluster, rows)
        log(
            f"  {inp.rows:,} rows; an uninterrupted upgrade takes {inp.full_s:.1f} s, "
            f"004 reported its first step at {inp.first_step_s:.1f} s"
        )
        rounds = []
        for i in range(failovers):
            synchronous = i < (failovers + 1) // 2
            via = ("pgbouncer", "leader")[i % 2]
            point = KillPoint(rnd.choice(STEPS), rnd.uniform(0, 0.5))
            rounds.append(
                run_round(
                    cluster, inp, i + 1, synchronous=synchronous, via=via, point=point, log=log
                )
            )
        for synchronous in (True, False) if commit_point else ():
            number = len(rounds) + 1
            rounds.append(
                run_round(
                    cluster,
                    inp,
                    number,
                    synchronous=synchronous,
                    via="leader",
                    point=COMMIT_POINT,
                    log=log,
                )
            )
    return Result(inp.rows, inp, rounds, time.monotonic() - started)


def check(result: Result) -> None:
    assert not result.violations(), "\n".join(result.violations()[:20])


def ci_point(rnd: random.Random) -> KillPoint:
    """A kill point inside 004's transaction: after one of its first four steps."""
    return KillPoint(rnd.choice(STEPS[:4]), rnd.uniform(0, 0.3))


def report(result: Result, args: argparse.Namespace) -> None:
    rounds = result.rounds
    random_rounds = [r for r in rounds if r.kill != COMMIT_POINT]
    commit_rounds = [r for r in rounds if r.kill == COMMIT_POINT]
    fo = sorted((r.failover for r in rounds if r.failover is not None), key=lambda f: f.promoted_s)
    outcomes = [r.outcome for r in rounds if r.outcome is not None]
    states = Counter(r.state for r in rounds)
    modes = Counter(r.mode for r in rounds)
    rcs = Counter(r.upgrade_rc for r in random_rounds)
    lost_lines = sum("lost the server during revision 004" in r.error for r in random_rounds)
    produced = {
        m: sum(r.outcome.produced for r in rounds if r.outcome and r.mode == m) for m in modes
    }
    lost = {m: sum(r.outcome.lost for r in rounds if r.outcome and r.mode == m) for m in modes}
    asynchronous = [r for r in rounds if r.outcome and not r.synchronous]
    lost_random = sum(r.outcome.lost for r in asynchronous if r.outcome and r.kill != COMMIT_POINT)
    at_commit = [r for r in asynchronous if r.kill == COMMIT_POINT]
    lost_commit = sum(r.outcome.lost for r in at_commit if r.outcome)
    produced_commit = sum(r.outcome.produced for r in at_commit if r.outcome)
    unstarted = sum(r.lost_starts for r in asynchronous)
    row = {
        "Scenario": "Leader failover during an upgrade (Patroni)",
        "Scale": f"2-node Patroni 3.0 cluster (etcd, PostgreSQL 15, ttl 10 s), PgBouncer 1.18 "
        f"repointed by on_role_change; 003→004 on {result.rows:,} rows; 2 host processes "
        f"through PgBouncer; {result.elapsed_s / 60:.0f} min",
        "Faults injected": f"{len(rounds)} kills of the leader's node (Patroni agent + "
        f"postmaster, SIGKILL): {len(random_rounds)} at random moments of 004, "
        f"{len(commit_rounds)} at its commit ({modes['synchronous']} in synchronous_mode, "
        f"{modes['asynchronous']} asynchronous); new primary wholly at 003 {states['003']}x, "
        f"at 004 {states['004']}x",
        "Tasks produced": f"{sum(produced.values()):,} acknowledged",
        "Lost": f"{lost.get('synchronous', 0)} (synchronous); asynchronous: {lost_random} in "
        f"the random rounds, {lost_commit:,} of {produced_commit:,} acknowledged with the "
        f"replica stopped (+ {unstarted} tasks never started: History lost)",
        "Duplicated-and-rejected": f"{sum(o.duplicated_rejected for o in outcomes):,}",
        "Worst stall": f"promotion {fo[-1].promoted_s:.1f} s (median "
        f"{fo[len(fo) // 2].promoted_s:.1f} s), PgBouncer repointed "
        f"{max(f.repointed_s for f in fo):.1f} s after the kill",
        "CI test (small scale)": CI_TEST,
    }
    details = [
        "Each round: two v0.4 host processes produce and consume through PgBouncer on a "
        "database of their own while `queueguard upgrade` migrates a fresh clone of the 003 "
        "input (through PgBouncer and straight to the leader, alternately); the leader's node "
        "dies (Patroni agent and postmaster with every child: SIGSTOP, then SIGKILL) at a "
        "moment up to 0.5 s after one of 004's steps drawn at random (the last one ends just "
        "before the commit); its leader key expires after the ttl and "
        "Patroni promotes the replica, whose `on_role_change` callback rewrites PgBouncer's "
        "`[databases]` entry to its own port and sends `RELOAD` on the admin console (PgBouncer "
        "then closes the old server connections as they are released; clients stay connected). "
        "The new primary must be wholly at 003 or at the golden 004, `queueguard upgrade` "
        "rerun against it must reach the golden state and the head invariants, the hosts "
        "must produce again, and after a drain every acknowledged append must have been "
        "started (judged in synchronous mode, counted in asynchronous mode). The dead node "
        "then rejoins as a replica (pg_rewind). Harness: `bench/topology/patroni.py`.",
        "",
        "The last two rounds kill the leader at 004's commit with the replica's WAL receiver "
        "stopped (SIGSTOP) beforehand and 48 MB of WAL written after it (more than the "
        "loopback sockets buffer), so nothing from then on reaches the replica: in "
        "synchronous mode the upgrade's commit and the hosts' appends wait for the replica "
        "and the node dies while the upgrade waits; in asynchronous mode they are "
        "acknowledged (the runner exits 0, at 004) and the node dies after. What the "
        "asynchronous rounds lose is what was acknowledged and not yet on the replica: with "
        "the replica a few bytes behind (loopback, the random rounds) nothing, with the "
        "replica stopped everything since.",
        "",
        "Judged in every round, whatever the mode: every append acknowledged after the "
        "failover was started (unless the failover lost its History rows: created before it, "
        "appended after, answered obsolete), and every committed task History does not show "
        "started had been handed to a worker before the failover (its start was lost with "
        "it) — anything else the runtime would have lost itself.",
        "",
        f"Command: `python -m bench.failover --failovers {args.failovers} --rows {args.rows}`. "
        f"Uninterrupted upgrade of the input: {result.input.full_s:.1f} s. Upgrades killed at "
        f"random moments: {rcs[2]} exited 2 with one line ({lost_lines} 'lost the server during "
        f"revision 004', {rcs[2] - lost_lines} 'lost the server between revisions': after the "
        f"commit), {rcs[0]} exited 0 (finished before the kill); every rerun reached the golden "
        "state and the head invariants.",
        "",
        "| # | mode | upgrade via | kill | 004 step reached | replica behind | exit "
        "| new primary | promoted | repointed | rerun | rejoin | acknowledged (after failover) "
        "| lost |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rounds:
        o, f = r.outcome, r.failover
        kill = (
            "at 004's commit, replica stopped"
            if r.kill == COMMIT_POINT
            else f"{r.kill.delay:.2f} s after {r.kill.after.split()[1]}"
        )
        details.append(
            f"| {r.number} | {r.mode} | {r.via} | {kill} | {r.phase} | {r.lag_bytes:,} B "
            f"| {r.upgrade_rc} | {r.state} "
            f"| {seconds(f.promoted_s) if f else '—'} | {seconds(f.repointed_s) if f else '—'} "
            f"| {seconds(r.rerun_s)} | {seconds(r.rejoin_s)} "
            + (f"| {o.produced:,} ({r.produced_after:,}) " if o else "| — ")
            + (f"| {o.lost:,} + {r.lost_starts} never started |" if o and r.lost_starts else "")
            + (f"| {o.lost:,} |" if o and not r.lost_starts else "")
            + ("" if o else "| — |")
        )
    record(12, row, details)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--failovers", type=int, default=10)
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--seed", type=int)
    parser.add_argument(
        "--no-commit-point", action="store_true", help="skip the two rounds killed at the commit"
    )
    parser.add_argument("--no-docs", action="store_true")
    args = parser.parse_args()
    reason = available()
    if reason is not None:
        raise SystemExit(reason)
    say(f"scenario 12: {args.failovers} leader failovers during an upgrade of {args.rows:,} rows")
    result = run(
        failovers=args.failovers,
        rows=args.rows,
        commit_point=not args.no_commit_point,
        seed=args.seed,
    )
    for r in result.rounds:
        say(f"  {r.as_json()}")
    check(result)
    if not args.no_docs:
        report(result, args)
    say("every failover left the upgrade wholly at 003 or 004 and a rerun reached 004")


if __name__ == "__main__":
    main()
