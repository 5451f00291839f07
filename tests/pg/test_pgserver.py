"""Contracts of the local PostgreSQL manager (queueguard.pg.servers).

Data directories live in a fresh directory directly under /tmp rather than pytest's tmp_path:
as root, pytest's /tmp/pytest-of-root is 0700, so the ``queueguard`` service user that runs the
server could not reach a data directory below it.
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict

from queueguard.errors import DataDirVersionMismatch, EmbeddedServerError
from queueguard.pg import servers
from queueguard.pg.servers import LocalServer, embedded_server, system_server

SRC = Path(__file__).resolve().parents[2] / "src"
SYSTEM_BIN = Path("/usr/lib/postgresql/15/bin")
MakeServer = Callable[..., LocalServer]


@pytest.fixture
def make_server() -> Iterator[MakeServer]:
    made: list[tuple[LocalServer, Path]] = []

    def make(bin_dir: Path | None = None) -> LocalServer:
        base = Path(tempfile.mkdtemp(prefix="qg-test-", dir="/tmp"))
        base.chmod(0o755)  # traversable by the service user when tests run as root
        data_dir = base / "pgdata"
        server = LocalServer(data_dir, bin_dir) if bin_dir else embedded_server(data_dir)
        made.append((server, base))
        return server

    yield make
    for server, base in made:
        try:
            server.stop()
        finally:
            shutil.rmtree(server.socket_dir, ignore_errors=True)
            shutil.rmtree(base, ignore_errors=True)


def server_uid() -> int:
    return pwd.getpwnam("queueguard").pw_uid if os.geteuid() == 0 else os.geteuid()


def postmaster_pid(server: LocalServer) -> int:
    return int((server.data_dir / "postmaster.pid").read_text().splitlines()[0])


def test_initdb_settings_and_no_tcp(make_server: MakeServer) -> None:
    server = make_server()
    dsn = server.ensure_running()
    assert dsn == f"postgresql://postgres@/postgres?host={server.socket_dir}&port=5432"
    assert "password" not in conninfo_to_dict(dsn)
    assert len(str(server.socket_dir / ".s.PGSQL.5432").encode()) < 107
    with psycopg.connect(dsn) as conn:
        assert conn.execute("SHOW server_encoding").fetchone() == ("UTF8",)
        row = conn.execute("SELECT datcollate FROM pg_database WHERE datname = 'postgres'")
        assert row.fetchone() == ("C",)
        assert conn.execute("SHOW listen_addresses").fetchone() == ("",)
        assert conn.execute("SHOW max_connections").fetchone() == ("200",)
        assert conn.execute("SELECT current_user").fetchone() == ("postgres",)
        assert conn.execute("SHOW server_version").fetchone()[0].startswith(server.major())  # type: ignore[index]
    assert server.major() == "18"
    hba = (server.data_dir / "pg_hba.conf").read_text()
    assert "local   all             all                                     trust" in hba


def test_socket_dir_is_0700_and_owned_by_the_server_user(make_server: MakeServer) -> None:
    server = make_server()
    server.ensure_running()
    st = server.socket_dir.lstat()
    assert stat.S_ISDIR(st.st_mode)
    assert stat.S_IMODE(st.st_mode) == 0o700
    assert st.st_uid == server_uid() == server.data_dir.stat().st_uid


def test_insecure_socket_dir_is_refused(make_server: MakeServer) -> None:
    server = make_server()
    server.socket_dir.mkdir(mode=0o755)
    server.socket_dir.chmod(0o755)
    with pytest.raises(EmbeddedServerError, match="must be a 0700 directory"):
        server.ensure_running()
    assert not (server.data_dir / "PG_VERSION").exists()


def test_reuse_returns_same_server(make_server: MakeServer) -> None:
    server = make_server()
    dsn = server.ensure_running()
    pid = postmaster_pid(server)
    started = time.perf_counter()
    assert server.ensure_running() == dsn
    assert time.perf_counter() - started < 1.0  # warm path: no pg_ctl involved
    assert postmaster_pid(server) == pid
    assert server.is_running()


def test_concurrent_first_start_shares_one_server(make_server: MakeServer) -> None:
    server = make_server()
    code = (
        "import json, sys; from pathlib import Path\n"
        "from queueguard.pg.servers import LocalServer\n"
        "s = LocalServer(Path(sys.argv[1]), Path(sys.argv[2])); dsn = s.ensure_running()\n"
        "pid = int((s.data_dir / 'postmaster.pid').read_text().split()[0])\n"
        "print(json.dumps({'dsn': dsn, 'pid': pid}))\n"
    )
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")]),
    }
    argv = [sys.executable, "-c", code, str(server.data_dir), str(server.bin_dir)]
    procs = [subprocess.Popen(argv, stdout=subprocess.PIPE, text=True, env=env) for _ in range(2)]
    results = [json.loads(p.communicate(timeout=120)[0]) for p in procs]
    assert [p.returncode for p in procs] == [0, 0]
    assert results[0] == results[1]
    assert results[0]["pid"] == postmaster_pid(server)
    with psycopg.connect(results[0]["dsn"]) as conn:
        conn.execute("SELECT 1")


def test_crashed_server_is_restarted(make_server: MakeServer) -> None:
    server = make_server()
    dsn = server.ensure_running()
    pid = postmaster_pid(server)
    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while server.is_running() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not server.is_running()
    assert (server.data_dir / "postmaster.pid").exists()  # stale pid file left behind
    assert server.ensure_running() == dsn
    assert postmaster_pid(server) != pid
    with psycopg.connect(dsn) as conn:
        assert conn.execute("SELECT 1").fetchone() == (1,)


def test_version_mismatch_leaves_data_dir_untouched(make_server: MakeServer) -> None:
    server = make_server()
    server.data_dir.mkdir(mode=0o700)
    pg_version = server.data_dir / "PG_VERSION"
    pg_version.write_text("9\n")
    before = [
        (p.stat().st_mtime_ns, p.stat().st_uid, p.stat().st_mode)
        for p in (server.data_dir, pg_version)
    ]
    with pytest.raises(DataDirVersionMismatch) as info:
        server.ensure_running()
    assert (info.value.found, info.value.expected) == ("9", "18")
    assert info.value.exit_code == 2
    assert pg_version.read_text() == "9\n"
    assert sorted(p.name for p in server.data_dir.iterdir()) == ["PG_VERSION"]
    after = [
        (p.stat().st_mtime_ns, p.stat().st_uid, p.stat().st_mode)
        for p in (server.data_dir, pg_version)
    ]
    assert after == before
    assert not server.is_running()


def test_stop_reports_whether_it_was_running(make_server: MakeServer) -> None:
    server = make_server()
    assert server.stop() is False  # never started
    server.ensure_running()
    assert server.stop() is True
    assert not server.is_running()
    assert server.stop() is False


def test_start_failure_reports_server_log_tail(make_server: MakeServer) -> None:
    server = make_server()
    server.ensure_running()
    server.stop()
    with (server.data_dir / "postgresql.conf").open("a") as conf:
        conf.write("shared_buffers = 'not a size'\n")
    with pytest.raises(EmbeddedServerError, match="shared_buffers") as info:
        server.ensure_running()
    assert "server.log" in str(info.value)


def test_default_data_dir(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("QUEUEGUARD_HOME", str(tmp_path))
    assert servers.default_data_dir() == tmp_path / "pgdata"
    monkeypatch.delenv("QUEUEGUARD_HOME")
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    assert servers.default_data_dir() == Path("/var/lib/queueguard/pgdata")
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    assert servers.default_data_dir() == tmp_path / "queueguard" / "pgdata"
    monkeypatch.setenv("XDG_DATA_HOME", "")
    monkeypatch.setenv("HOME", str(tmp_path))
    assert servers.default_data_dir() == tmp_path / ".local/share/queueguard/pgdata"


def test_system_server_postgres_15(make_server: MakeServer) -> None:
    if not (SYSTEM_BIN / "postgres").exists():
        message = f"{SYSTEM_BIN} is missing (apt-get install postgresql-15)"
        if os.environ.get("QUEUEGUARD_REQUIRE_SYSTEM_PG") == "1":
            pytest.fail(f"QUEUEGUARD_REQUIRE_SYSTEM_PG=1 but {message}")
        pytest.skip(message)
    server = make_server(SYSTEM_BIN)
    assert system_server(server.data_dir, SYSTEM_BIN) == server
    assert server.major() == "15"
    dsn = server.ensure_running()
    with psycopg.connect(dsn) as conn:
        version = conn.execute("SHOW server_version").fetchone()
        assert version is not None and version[0].startswith("15.")
        assert conn.execute("SHOW listen_addresses").fetchone() == ("",)
    assert server.stop() is True
