"""Private scratch PostgreSQL servers that a scenario may stop, crash and restart."""

from __future__ import annotations

import contextlib
import re
import shutil
import socket
import tempfile
from pathlib import Path
from urllib.parse import quote

from bench.common.databases import query
from queueguard.pg import servers


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class ScratchServer:
    """A private PostgreSQL server (embedded binaries, data directory under /tmp).

    Unlike the shared embedded server, a scenario may stop, crash and restart it. With
    `tcp=True` it also listens on 127.0.0.1:<port> and accepts password (SCRAM) logins
    there; the Unix socket stays trust-only for the `postgres` superuser (no password).
    """

    def __init__(self, *, tcp: bool = False) -> None:
        self.base = Path(tempfile.mkdtemp(prefix="qg-chaos-", dir="/tmp"))
        self.base.chmod(0o755)  # as root the server runs as the queueguard user
        self.tcp = tcp
        settings = ("listen_addresses=127.0.0.1",) if tcp else ()
        self.server = servers.LocalServer(
            self.base / "pgdata", servers.embedded_bin_dir(), port=free_port(), settings=settings
        )

    @property
    def port(self) -> int:
        return self.server.port

    def start(self) -> str:
        first = not (self.server.data_dir / "PG_VERSION").exists()
        dsn = self.server.ensure_running()
        if first and self.tcp:
            self._allow_passwords_over_tcp()
        return dsn

    def _allow_passwords_over_tcp(self) -> None:
        hba = self.server.data_dir / "pg_hba.conf"
        text = re.sub(
            r"^(host\s+all\s+all\s+127\.0\.0\.1/32\s+)reject\s*$",
            r"\1scram-sha-256",
            hba.read_text(),
            flags=re.MULTILINE,
        )
        hba.write_text(text)
        query(self.admin_dsn(), "SELECT pg_reload_conf()")

    def admin_dsn(self, dbname: str = "postgres") -> str:
        return self.server.dsn(dbname)

    def tcp_dsn(self, user: str, password: str, dbname: str, port: int | None = None) -> str:
        """A URL DSN with the password in it (percent-encoded), SSL and GSS off."""
        return (
            f"postgresql://{quote(user, safe='')}:{quote(password, safe='')}@127.0.0.1:"
            f"{port or self.port}/{quote(dbname, safe='')}?sslmode=disable&gssencmode=disable"
        )

    def stop(self, mode: str = "fast") -> None:
        """`fast` (clean shutdown) or `immediate` (no checkpoint: crash recovery at start)."""
        if mode == "fast":
            self.server.stop()
        else:
            self.server._run("pg_ctl", "-D", str(self.server.data_dir), "-w", "-m", mode, "stop")

    def close(self) -> None:
        try:
            with contextlib.suppress(Exception):
                self.stop("immediate")
        finally:
            shutil.rmtree(self.server.socket_dir, ignore_errors=True)
            shutil.rmtree(self.base, ignore_errors=True)

    def __enter__(self) -> ScratchServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
