"""Scenario 12's runtime traffic (`bench/failover/scenario.py`): v0.4 host processes producing and
consuming through PgBouncer while the leader fails over, and a probe of the replica's lag."""

from __future__ import annotations

import contextlib
import json
import shutil
import tempfile
import time
from pathlib import Path

import psycopg

from bench.common.audit import install_audit
from bench.common.databases import create_database, query
from bench.common.host import HostConfig
from bench.common.host_process import HostProcess, reap
from bench.common.ledger import Outcome, drain_and_judge
from bench.common.workload import queues_for
from bench.topology.patroni import PatroniCluster
from queueguard.queue_schema.runner import upgrade


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
