"""A private primary with a streaming hot standby (both from the embedded binaries), for the
tests and benchmarks that need a replica: preflight on a standby, refusals, replication of an
upgrade."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import time
from pathlib import Path
from types import TracebackType

import psycopg

from bench.common.servers import free_port
from queueguard.pg import servers


class PrimaryWithStandby:
    """`with PrimaryWithStandby() as pair: pair.primary_dsn(db), pair.standby_dsn(db)`."""

    def __init__(self) -> None:
        self.base = Path(tempfile.mkdtemp(prefix="qg-replica-", dir="/tmp"))
        self.base.chmod(0o755)  # as root the servers run as the service user
        bin_dir = servers.embedded_bin_dir()
        self.primary = servers.LocalServer(self.base / "primary", bin_dir, port=free_port())
        self.standby = servers.LocalServer(
            self.base / "standby", bin_dir, port=free_port(), settings=("hot_standby=on",)
        )

    def start(self) -> PrimaryWithStandby:
        self.primary.ensure_running()
        self.standby.data_dir.mkdir(mode=0o700)
        if os.geteuid() == 0:  # the base backup is written by the service user
            shutil.chown(self.standby.data_dir, servers.SERVICE_USER, servers.SERVICE_USER)
        # A base backup with -R: standby.signal plus primary_conninfo over the primary's socket.
        # the server's own runner: as root it runs the tool as the service user
        self.primary._run(
            "pg_basebackup",
            "-D",
            str(self.standby.data_dir),
            "-h",
            str(self.primary.socket_dir),
            "-p",
            str(self.primary.port),
            "-U",
            "postgres",
            "-R",
            "-X",
            "stream",
        )
        self.standby.ensure_running()
        return self

    def primary_dsn(self, dbname: str = "postgres") -> str:
        return self.primary.dsn(dbname)

    def standby_dsn(self, dbname: str = "postgres") -> str:
        return self.standby.dsn(dbname)

    def wait_replayed(self, timeout: float = 30) -> None:
        """Until the standby has replayed everything the primary has written so far."""
        with psycopg.connect(self.primary_dsn(), autocommit=True) as primary:
            target = primary.execute("SELECT pg_current_wal_lsn()").fetchone()[0]  # type: ignore[index]
        deadline = time.monotonic() + timeout
        with psycopg.connect(self.standby_dsn(), autocommit=True) as standby:
            while True:
                done = standby.execute(
                    "SELECT pg_last_wal_replay_lsn() >= %s::pg_lsn", (target,)
                ).fetchone()
                if done and done[0]:
                    return
                if time.monotonic() > deadline:
                    raise TimeoutError("the standby did not catch up")
                time.sleep(0.05)

    def stop(self) -> None:
        for server in (self.standby, self.primary):
            with contextlib.suppress(Exception):  # best effort on teardown
                server.stop()
            shutil.rmtree(server.socket_dir, ignore_errors=True)
        shutil.rmtree(self.base, ignore_errors=True)

    def __enter__(self) -> PrimaryWithStandby:
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
