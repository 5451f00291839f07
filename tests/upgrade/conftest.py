"""Fixtures of the upgrade-half tests: hand-built v0.1 and v0.3 databases, cloned per test."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from .preflight_support import V01_ROWS, V03_ROWS, template


@pytest.fixture(scope="session")
def v03_template(pg_admin_dsn: str) -> Iterator[str]:
    """A clean hand-built v0.3 database, cloned per test."""
    yield from template(pg_admin_dsn, "003", V03_ROWS)


@pytest.fixture
def v03_db(make_db: Callable[..., str], v03_template: str) -> str:
    return make_db(template=v03_template)


@pytest.fixture(scope="session")
def v01_template(pg_admin_dsn: str) -> Iterator[str]:
    yield from template(pg_admin_dsn, "001", V01_ROWS)


@pytest.fixture
def v01_db(make_db: Callable[..., str], v01_template: str) -> str:
    return make_db(template=v01_template)
