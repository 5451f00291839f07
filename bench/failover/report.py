"""Scenario 12's report (`bench/failover/scenario.py`): the row of docs/reliability.md and its
section."""

from __future__ import annotations

import argparse
from collections import Counter

from bench.common.report import record, seconds
from bench.failover.model import CI_TEST, COMMIT_POINT, Result


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
