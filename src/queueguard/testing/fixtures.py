"""The fixtures of the queueguard pytest plugin (see queueguard.testing), registered only
when the plugin is enabled."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest


@pytest.fixture(scope="session")
def queueguard_server() -> str:
    from queueguard.pg import scratch

    return scratch.server_dsn()


@pytest.fixture
def queueguard_database(queueguard_server: str) -> Iterator[Callable[..., str]]:
    from queueguard.pg.scratch import ScratchDatabases
    from queueguard.queue_schema import golden
    from queueguard.queue_schema.runner import upgrade

    with ScratchDatabases(queueguard_server) as databases:

        def make(*, fixture: str | None = None, revision: str | None = None) -> str:
            dsn = databases.create()
            if fixture is not None:
                golden.load(golden.get(fixture), dsn)
            elif revision is not None:
                upgrade(dsn, to=revision, progress=False)
            return dsn

        yield make


@pytest.fixture
def queueguard_dsn(queueguard_database: Callable[..., str]) -> str:
    return queueguard_database()


@pytest.fixture
def queueguard_fixture_name() -> str:
    return "v0.3"


@pytest.fixture
def queueguard_old_db(queueguard_database: Callable[..., str], queueguard_fixture_name: str) -> str:
    return queueguard_database(fixture=queueguard_fixture_name)


@pytest.fixture
def queueguard_upgraded_db(queueguard_old_db: str) -> str:
    from queueguard.queue_schema.runner import upgrade

    upgrade(queueguard_old_db, progress=False)
    return queueguard_old_db


@pytest.fixture
def queueguard_runtime(queueguard_upgraded_db: str) -> Iterator[Any]:
    from queueguard.runtime.matching import Matching
    from queueguard.stores.postgres import PostgresStore

    store = PostgresStore(queueguard_upgraded_db, host_id="pytest")
    try:
        yield Matching(store, host_id="pytest")
    finally:
        store.close()
