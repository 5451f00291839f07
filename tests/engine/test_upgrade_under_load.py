"""`upgrade` of a set of another format under load, on the embedded server: writers keep inserting
into `events` while a revision takes ACCESS EXCLUSIVE on it (bench/engine/load.py drives it;
`python -m bench.engine` is the same at a larger size).

- behind a long reader, queueguard gives up after its ladder with nothing changed, and no
  writer waits longer than the largest attempt's lock_timeout plus slack;
- without the reader, the revision applies and no writer waits longer than the revision's
  measured lock hold plus slack;
- the same statements applied the way temporal-sql-tool applies them (emulated: autocommit,
  no lock_timeout) queue behind the reader, and every writer queues behind them for about
  as long as the reader stays: longer than queueguard's bound.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from bench.engine import load
from queueguard.engine.apply.ladder import RETRY_GROWTH, ladder_s
from queueguard.engine.apply.session import Limits
from queueguard.pg import scratch
from queueguard.sets import MigrationSet

ROWS = 100_000
WRITERS = 3
READER_S = 3.0
LIMITS = Limits(lock_timeout_ms=200, retries=2)
#: generous: two cores shared by the server, the writers, the sampler and other jobs
SLACK_S = 1.5
#: the longest a queued ALTER can make writers wait: its largest attempt's lock_timeout
LARGEST_ATTEMPT_S = LIMITS.lock_timeout_ms * RETRY_GROWTH**LIMITS.retries / 1000
QUEUEGUARD_BOUND_S = LARGEST_ATTEMPT_S + SLACK_S


@pytest.fixture(scope="module")
def events_set(tmp_path_factory: pytest.TempPathFactory) -> MigrationSet:
    return load.write_set(Path(tmp_path_factory.mktemp("set-load")) / "set")


@pytest.fixture(scope="module")
def at_v1(pg_admin_dsn: str, events_set: MigrationSet) -> Iterator[str]:
    """A database at V1 with ROWS events: the template each test clones."""
    with scratch.ScratchDatabases(pg_admin_dsn, prefix="qgload") as databases:
        dsn = databases.create()
        load.build(events_set, dsn, ROWS)
        yield scratch.dbname_of(dsn)


def _case(
    make_db: Callable[..., str], at_v1: str, mset: MigrationSet, applier: str, reader: bool
) -> load.CaseResult:
    result = load.run_case(
        mset,
        make_db(template=at_v1),
        applier,
        reader_s=READER_S if reader else None,
        limits=LIMITS,
        writers=WRITERS,
    )
    assert result.writer_errors == []
    assert result.inserts > 0
    return result


def test_behind_a_long_reader_queueguard_gives_up_and_writers_wait_at_most_a_lock_timeout(
    make_db: Callable[..., str], at_v1: str, events_set: MigrationSet
) -> None:
    result = _case(make_db, at_v1, events_set, load.QUEUEGUARD, reader=True)
    assert not result.applied and result.outcome.startswith("LockTimeout")
    assert "nothing was changed" in result.outcome
    assert result.catalog_unchanged
    assert result.sampled_hold_s == 0.0  # its ALTER never got the lock
    assert result.apply_s <= ladder_s(LIMITS.lock_timeout_ms, LIMITS.retries) + SLACK_S
    assert result.longest_s <= QUEUEGUARD_BOUND_S, result.as_json()


def test_without_the_reader_it_applies_and_writers_wait_at_most_its_lock_hold(
    make_db: Callable[..., str], at_v1: str, events_set: MigrationSet
) -> None:
    result = _case(make_db, at_v1, events_set, load.QUEUEGUARD, reader=False)
    assert result.applied and not result.catalog_unchanged
    assert result.held_s is not None and result.held_s > 0
    assert result.longest_s <= result.held_s + SLACK_S, result.as_json()


def test_applied_like_temporal_sql_tool_writers_wait_as_long_as_the_reader(
    make_db: Callable[..., str], at_v1: str, events_set: MigrationSet
) -> None:
    result = _case(make_db, at_v1, events_set, load.EMULATION, reader=True)
    assert result.applied and not result.catalog_unchanged
    assert result.reader_held_s is not None and result.reader_held_s >= READER_S
    # the ALTER queued behind the reader from the start, every writer behind the ALTER
    assert result.longest_s >= READER_S - 0.5, result.as_json()
    assert result.longest_s > QUEUEGUARD_BOUND_S, result.as_json()
