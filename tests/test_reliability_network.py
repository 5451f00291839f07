"""Reliability, CI scale: unknown commit outcomes and database restarts (docs/reliability.md).

Both run on private scratch servers under /tmp (never the shared embedded server): scenario
6 behind the in-process TCP proxy of `bench/chaos/proxy.py`, scenario 5 stopping and
starting it.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator

import psycopg
import pytest

from bench.chaos import connection, unknown_commit
from bench.chaos.proxy import REPLY_LOST, REQUEST_LOST, TcpProxy, wait_backend_gone
from bench.common.databases import create_database, query
from bench.common.servers import ScratchServer


@pytest.fixture(scope="module")
def tcp_server() -> Iterator[tuple[ScratchServer, str]]:
    password = "pw-" + secrets.token_hex(6)
    with ScratchServer(tcp=True) as server:
        query(server.admin_dsn(), f"CREATE ROLE qg_proxy LOGIN PASSWORD '{password}'")
        create_database(server.admin_dsn(), "proxied", owner="qg_proxy")
        yield server, password


@pytest.mark.parametrize(("mode", "committed"), [(REPLY_LOST, True), (REQUEST_LOST, False)])
def test_the_proxy_cuts_after_the_commit_was_sent(
    tcp_server: tuple[ScratchServer, str], mode: str, committed: bool
) -> None:
    """The fault itself: the client cannot tell the two modes apart; the server can."""
    server, password = tcp_server
    direct = server.tcp_dsn("qg_proxy", password, "proxied")
    query(direct, "CREATE TABLE IF NOT EXISTS cut (id int)")
    proxy = TcpProxy(server.port)
    try:
        marker = secrets.randbelow(10**9)
        via_proxy = server.tcp_dsn("qg_proxy", password, "proxied", port=proxy.port)
        with psycopg.connect(via_proxy, autocommit=True) as conn:
            conn.execute("SELECT 1")  # a statement that is not armed goes through
            proxy.arm(lambda sql: "INSERT INTO cut" in sql, mode)
            with pytest.raises(psycopg.OperationalError):
                conn.execute("INSERT INTO cut VALUES (%s)", (marker,))
        cut = proxy.wait_cut()
        wait_backend_gone(server.admin_dsn(), cut.backend_pid)
        rows = query(direct, "SELECT count(*) FROM cut WHERE id = %s", (marker,))
        assert rows == [(1 if committed else 0,)]
        assert cut.mode == mode and "INSERT INTO cut" in cut.statement
    finally:
        proxy.close()


@pytest.mark.slow
def test_unknown_commit_outcome() -> None:
    """Appends, checkpoints and loads cut after COMMIT: the reader never skips, ids stay
    consecutive, committed tasks all start, rolled-back ones never do."""
    result = unknown_commit.run(faults=24, seed=8, log=print)
    print(result.as_json())
    assert result.faults[("append", REPLY_LOST)] > 0
    assert result.faults[("append", REQUEST_LOST)] > 0
    # an arm may find no matching commit on a loaded machine; a stuck host misses them all
    assert sum(result.missed.values()) <= 3, result.missed
    assert not result.violations, result.violations
    assert result.lost == 0 and not result.skips and result.reads > 0


@pytest.mark.slow
def test_database_restarts_mid_stream() -> None:
    """A fast and an immediate (crash) restart: hosts reconnect, reload with a higher
    range, resume above the saved ack level; nothing confirmed is lost."""
    # 2.5-3.5 s between restarts: each host notices, backs off, reconnects and reloads every
    # queue in between, also on a loaded 2-core machine (1-2 s was not always enough there).
    result = connection.run(restarts=2, pause=(2.5, 3.5), down=(0.2, 0.6), seed=5, log=print)
    print(result.as_json())
    connection.check(result)


def test_a_scratch_server_listens_on_tcp_only_when_asked(
    tcp_server: tuple[ScratchServer, str],
) -> None:
    """pgserver's `port`/`settings` options (used here only): TCP on 127.0.0.1 with password
    logins, the Unix socket named after the port; bad settings are refused up front."""
    from queueguard.pg.servers import LocalServer

    server, password = tcp_server
    rows = query(server.admin_dsn(), "SHOW listen_addresses")
    assert rows == [("127.0.0.1",)]
    assert query(server.admin_dsn(), "SHOW port") == [(str(server.port),)]
    assert f"port={server.port}" in server.admin_dsn()
    with psycopg.connect(server.tcp_dsn("qg_proxy", password, "proxied")) as conn:
        assert conn.execute("SELECT current_user").fetchone() == ("qg_proxy",)
    with pytest.raises(psycopg.OperationalError):  # the superuser has no password to give
        psycopg.connect(server.tcp_dsn("postgres", "", "postgres")).close()
    for bad in ("listen_addresses = *", "port=1 ; x", "noequals"):
        with pytest.raises(ValueError):
            LocalServer(server.server.data_dir, server.server.bin_dir, settings=(bad,))
