"""Concurrent `queueguard upgrade` runners through a transaction pooler, while other clients
run short transactions on the same database (so a client's next transaction may land on
another server connection): one round, judged."""

from __future__ import annotations

import json
import subprocess
import threading
from dataclasses import dataclass, field
from typing import Any

import psycopg

from bench.common.commands import QUEUEGUARD, ROOT
from bench.topology.pgbouncer import PgBouncer
from queueguard import revisions, snapshot
from queueguard.pg.connect import connection
from queueguard.pg.scratch import ScratchDatabases, dbname_of
from queueguard.queue_schema import golden, state

#: Client transactions between the runners' (reads of what 004 leaves alone).
CLIENT_SQL = "SELECT count(*) FROM executions"


@dataclass
class Round:
    runners: int
    codes: list[int] = field(default_factory=list)
    reports: list[dict[str, Any]] = field(default_factory=list)
    stderr: list[str] = field(default_factory=list)
    client_transactions: int = 0
    client_failures: list[str] = field(default_factory=list)
    advisory_locks_left: int = -1
    golden: bool = False

    def problems(self, fixture_revision: str) -> list[str]:
        """What breaks "exactly one runner applies each revision, the others say so"."""
        found = []
        if self.codes != [0] * self.runners:
            found.append(f"exit codes {self.codes}: {self.stderr}")
            return found
        pending = [r.id for r in revisions.packaged().pending(fixture_revision, "head")]
        applied = sorted(rev for r in self.reports for rev in r["applied"])
        if applied != pending:
            found.append(f"applied {applied}, expected each of {pending} exactly once")
        migrations = revisions.packaged()
        for report in self.reports:
            own = [r.id for r in migrations.pending(report["before"], "head")]
            if sorted(report["applied"] + report["skipped"]) != own:
                found.append(f"a runner did not account for every revision: {report}")
        if self.client_failures:
            found.append(f"clients failed beside the runners: {self.client_failures}")
        if self.advisory_locks_left != 0:
            found.append(f"{self.advisory_locks_left} advisory lock(s) left behind")
        if not self.golden:
            found.append("the database did not reach the golden state")
        return found


def run_round(admin: str, pooler: PgBouncer, runners: int, fixture: str = "v0.3") -> Round:
    result = Round(runners)
    with ScratchDatabases(admin, prefix="qg_pool") as databases:
        direct = databases.create()
        chosen = golden.get(fixture)
        golden.load(chosen, direct)
        pooled = pooler.dsn(dbname_of(direct))
        stop = threading.Event()
        counts = [0, 0, 0]
        failures: list[str] = []

        def client(i: int) -> None:
            try:
                with psycopg.connect(pooled, prepare_threshold=None, connect_timeout=10) as conn:
                    while not stop.is_set():
                        conn.execute(CLIENT_SQL).fetchone()
                        conn.commit()
                        counts[i] += 1
            except psycopg.Error as exc:  # the round reports it; a client never hangs it
                failures.append(f"client {i}: {exc}")

        clients = [threading.Thread(target=client, args=(i,)) for i in range(len(counts))]
        for thread in clients:
            thread.start()
        try:
            procs = [
                subprocess.Popen(
                    [QUEUEGUARD, "upgrade", "--dsn", pooled, "--json"],
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    text=True,
                    cwd=ROOT,
                )
                for _ in range(runners)
            ]
            outputs = [p.communicate(timeout=180) for p in procs]
        finally:
            stop.set()
            for thread in clients:
                thread.join()
        result.client_transactions = sum(counts)
        result.client_failures = failures
        result.codes = [p.returncode for p in procs]
        result.stderr = [err.strip()[-500:] for _, err in outputs]
        result.reports = [json.loads(out) for out, _ in outputs if out.strip()]
        with connection(direct) as conn:
            row = conn.execute(
                "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND database = "
                "(SELECT oid FROM pg_database WHERE datname = current_database())"
            )
            result.advisory_locks_left = int(row.fetchone()[0])  # type: ignore[index]
            actual = state.export_database(conn)
        result.golden = snapshot.normalise(actual) == snapshot.normalise(chosen.expected_head)
    return result
