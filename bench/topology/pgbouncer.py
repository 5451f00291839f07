"""A private PgBouncer in transaction-pooling mode in front of a PostgreSQL server.

Started from the machine's `pgbouncer` binary (Debian's package; `.ci/run` installs it) on a
free loopback port, with a small server pool so consecutive transactions of one client land
on different server connections — the setting that breaks session state (session advisory
locks, prepared statements, SET without LOCAL). As root it runs as the service user that runs
the embedded server (PgBouncer refuses root).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from types import TracebackType

from queueguard.pg import dsn as dsns
from queueguard.pg.servers import SERVICE_USER

BINARY = "pgbouncer"
REQUIRE_ENV = "QUEUEGUARD_REQUIRE_TOPOLOGY"


def available() -> str | None:
    """The reason PgBouncer cannot run here, or None when it can."""
    if shutil.which(BINARY) is None and not Path("/usr/sbin/pgbouncer").exists():
        return "pgbouncer is not installed (Debian: apt-get install pgbouncer)"
    return None


def binary() -> str:
    return shutil.which(BINARY) or "/usr/sbin/pgbouncer"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class PgBouncer:
    """`with PgBouncer(server_dsn) as pooler: pooler.dsn(dbname)`."""

    def __init__(
        self,
        server_dsn: str,
        *,
        pool_size: int = 4,
        pool_mode: str = "transaction",
        settings: dict[str, str] | None = None,
    ):
        """`settings`: extra `[pgbouncer]` lines (e.g. `admin_users`), after the defaults."""
        params = dsns.params(server_dsn)
        self.user = params.get("user", "postgres")
        self.upstream = {k: params[k] for k in ("host", "port") if k in params}
        self.pool_size, self.pool_mode = pool_size, pool_mode
        self.settings = dict(settings or {})
        self.port = _free_port()
        self.folder = Path(tempfile.mkdtemp(prefix="qg-pgbouncer-"))
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def config_path(self) -> Path:
        return self.folder / "pgbouncer.ini"

    def _write_config(self) -> Path:
        upstream = " ".join(f"{k}={v}" for k, v in self.upstream.items())
        (self.folder / "users.txt").write_text(f'"{self.user}" ""\n')
        config = self.config_path
        config.write_text(
            "[databases]\n"
            f"* = {upstream} user={self.user}\n"
            "[pgbouncer]\n"
            "listen_addr = 127.0.0.1\n"
            f"listen_port = {self.port}\n"
            "unix_socket_dir =\n"
            "auth_type = trust\n"
            f"auth_file = {self.folder / 'users.txt'}\n"
            f"pool_mode = {self.pool_mode}\n"
            f"default_pool_size = {self.pool_size}\n"
            "max_client_conn = 500\n"
            "server_reset_query =\n"
            # a client waiting for a server connection fails after 30 s instead of 120 s
            "query_wait_timeout = 30\n"
            "ignore_startup_parameters = extra_float_digits,options\n"
            f"logfile = {self.folder / 'pgbouncer.log'}\n"
            + "".join(f"{k} = {v}\n" for k, v in self.settings.items())
        )
        return config

    def start(self) -> PgBouncer:
        config = self._write_config()
        argv = [binary(), str(config)]
        if os.geteuid() == 0:
            shutil.chown(self.folder, SERVICE_USER)
            for path in self.folder.iterdir():
                shutil.chown(path, SERVICE_USER)
            argv = [binary(), "-u", SERVICE_USER, str(config)]
        # -q: log to the log file only. A pipe nobody reads would fill up with one line per
        # connection and then block PgBouncer's single event loop: every client would hang.
        argv.insert(1, "-q")
        self.process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"pgbouncer exited: {self.log()}")
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", self.port)) == 0:
                    return self
            time.sleep(0.05)
        raise RuntimeError(f"pgbouncer did not listen on {self.port}: {self.log()}")

    def log(self) -> str:
        path = self.folder / "pgbouncer.log"
        return path.read_text(errors="replace")[-2000:] if path.exists() else ""

    def dsn(self, dbname: str) -> str:
        return f"host=127.0.0.1 port={self.port} user={self.user} dbname={dbname}"

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        shutil.rmtree(self.folder, ignore_errors=True)

    def __enter__(self) -> PgBouncer:
        return self.start()

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
