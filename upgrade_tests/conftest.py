"""The upgrade suite uses queueguard's own pytest plugin (enabled in pyproject.toml)."""

from __future__ import annotations

from typing import Any

import pytest

from queueguard.pg.connect import connection
from queueguard.queue_schema.golden import Fixture, all_fixtures

FIXTURES = all_fixtures()


@pytest.fixture(params=[f.name for f in FIXTURES])
def fixture(request: pytest.FixtureRequest) -> Fixture:
    return next(f for f in FIXTURES if f.name == request.param)


def rows(dsn: str, query: str) -> list[tuple[Any, ...]]:
    with connection(dsn) as conn:
        return conn.execute(query).fetchall()
