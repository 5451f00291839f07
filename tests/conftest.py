"""Shared fixtures: a real PostgreSQL server (embedded by default) and scratch databases."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from bench.topology import pgbouncer as pooler
from bench.topology.pgbouncer import PgBouncer
from queueguard.core.store import Store
from queueguard.pg import scratch, servers
from queueguard.pg.connect import connection
from queueguard.queue_schema.runner import upgrade
from queueguard.stores.memory import MemoryDatabase, MemoryStore
from queueguard.stores.postgres import PostgresStore

#: set by `pytest_configure` when the suite runs on an embedded server of its own
OWN_SERVER = "QUEUEGUARD_TEST_SERVER"


def pytest_configure(config: pytest.Config) -> None:
    """The suite's embedded server is its own: a data directory beside the default one
    (`…/queueguard/tests/pgdata`), so the thousands of databases the suite creates and drops
    never share a server with the developer's, and so it may run with fsync off (below).
    Set in the controller before pytest-xdist starts its workers, which inherit it, as do the
    CLIs the tests run. Left alone when the caller chose a server (`QUEUEGUARD_PG`) or a data
    directory (`QUEUEGUARD_HOME`; `.ci/run` gives its own)."""
    if "QUEUEGUARD_HOME" in os.environ or os.environ.get(scratch.ENV, "embedded") != "embedded":
        return
    os.environ["QUEUEGUARD_HOME"] = str(servers.default_data_dir().parent / "tests")
    os.environ[OWN_SERVER] = "1"


@pytest.fixture(scope="session")
def pg_admin_dsn() -> str:
    dsn = scratch.server_dsn()
    if os.environ.get(OWN_SERVER):
        # the suite's own server holds nothing that must outlive a crash of the machine, and
        # each CREATE DATABASE would wait on the disk (kept in its postgresql.auto.conf)
        with connection(dsn, autocommit=True) as conn:
            conn.execute("ALTER SYSTEM SET fsync = off")
            conn.execute("SELECT pg_reload_conf()")
    return dsn


@pytest.fixture(scope="session")
def head_template(pg_admin_dsn: str) -> Iterator[str]:
    """A database migrated to head once; tests clone it (CREATE DATABASE … TEMPLATE)."""
    dsn = scratch.create_database(pg_admin_dsn, prefix="qgtpl")
    upgrade(dsn, progress=False)
    name = scratch.dbname_of(dsn)
    yield name
    scratch.drop_database(pg_admin_dsn, name)


@pytest.fixture
def make_db(pg_admin_dsn: str) -> Iterator[Callable[..., str]]:
    """Factory of scratch databases (`make(template=None)`), dropped after the test."""
    with scratch.ScratchDatabases(pg_admin_dsn) as databases:
        yield databases.create


@pytest.fixture
def empty_db(make_db: Callable[..., str]) -> str:
    return make_db()


@pytest.fixture
def head_db(make_db: Callable[..., str], head_template: str) -> str:
    return make_db(template=head_template)


@pytest.fixture(scope="session")
def pgbouncer(pg_admin_dsn: str) -> Iterator[PgBouncer]:
    """A real PgBouncer (transaction pooling) in front of the test server: skipped with its
    reason where Debian's pgbouncer is not installed, required in CI."""
    reason = pooler.available()
    if reason is not None:
        if os.environ.get(pooler.REQUIRE_ENV):
            pytest.fail(f"{pooler.REQUIRE_ENV} is set but {reason}")
        pytest.skip(reason)
    with PgBouncer(pg_admin_dsn) as running:
        yield running


def store_factory(
    request: pytest.FixtureRequest, kind: str, **options: Any
) -> Iterator[Callable[[], Store]]:
    """Independent store handles (pools) on one backing database: in memory, on PostgreSQL,
    or on PostgreSQL through PgBouncer in transaction-pooling mode. `options` go to every
    store (`start_timeout`, `history_clock`)."""
    opened: list[Store] = []
    if kind == "memory":
        db = MemoryDatabase()

        def make() -> Store:
            return MemoryStore(db, **options)
    else:
        dsn = request.getfixturevalue("head_db")
        if kind == "pgbouncer":
            dsn = request.getfixturevalue("pgbouncer").dsn(scratch.dbname_of(dsn))
            options = {"prepare": False, **options}

        def make() -> Store:
            store = PostgresStore(dsn, host_id=f"h{len(opened)}", pool_size=2, **options)
            opened.append(store)
            return store

    yield make
    for store in opened:
        store.close()


@pytest.fixture(params=["memory", "postgres"])
def new_store(request: pytest.FixtureRequest) -> Iterator[Callable[[], Store]]:
    """A factory of independent store handles (pools) on one backing database."""
    yield from store_factory(request, request.param)
