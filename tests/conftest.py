"""Shared fixtures: a real PostgreSQL server (embedded by default) and scratch databases."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from queueguard.core.store import Store
from queueguard.pg import scratch
from queueguard.stores.memory import MemoryDatabase, MemoryStore
from queueguard.stores.postgres import PostgresStore
from queueguard.upgrade.runner import upgrade


@pytest.fixture(scope="session")
def pg_admin_dsn() -> str:
    return scratch.server_dsn()


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


@pytest.fixture(params=["memory", "postgres"])
def new_store(request: pytest.FixtureRequest) -> Iterator[Callable[[], Store]]:
    """A factory of independent store handles (pools) on one backing database."""
    opened: list[Store] = []
    if request.param == "memory":
        db = MemoryDatabase()

        def make() -> Store:
            return MemoryStore(db)
    else:
        dsn = request.getfixturevalue("head_db")

        def make() -> Store:
            store = PostgresStore(dsn, host_id=f"h{len(opened)}", pool_size=2)
            opened.append(store)
            return store

    yield make
    for store in opened:
        store.close()
