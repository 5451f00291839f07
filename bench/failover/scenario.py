"""Chaos scenario 12: the leader fails over during an upgrade (Patroni, PgBouncer in front).

A two-node Patroni cluster (`bench/topology/patroni.py`: etcd on loopback, Debian's
PostgreSQL 15, PgBouncer in transaction pooling repointed by an `on_role_change` callback).
A 003 database of `--rows` task rows (`bench/common/v3_database.py`) is built once on the
cluster; an uninterrupted upgrade of a clone gives the golden 004 state.
Then, `--failovers` times:

1. two v0.4 host processes (`bench/common/host.py`: producers and consumers, every confirmed
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
import random
import re
import subprocess
import threading
import time
from typing import Any

from bench.common.commands import QUEUEGUARD
from bench.common.databases import query
from bench.common.fingerprints import upgrade_state
from bench.common.report import say
from bench.common.workload import rng
from bench.failover.model import (
    COMMIT_POINT,
    FILLER,
    LOST_LINE,
    STEPS,
    SYNC_REP_WAITERS,
    Input,
    KillPoint,
    Result,
    Round,
    clone,
    head_problems,
    prepare_input,
)
from bench.failover.report import report
from bench.failover.traffic import LagProbe, Traffic
from bench.topology.patroni import PatroniCluster, available
from queueguard.pg.connect import connection


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
