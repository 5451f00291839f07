"""`--max-lag` against a real streaming standby whose replay is paused (a private primary and
a hot standby from the embedded binaries): the rebuild waits while the standby is further
behind than the limit, says so on its progress line, never swaps meanwhile, and goes on once
replay resumes (the lag is the reported `replay_lag` or, larger, the age of the oldest WAL
position the standby has not replayed). Without a standby there is nothing to watch, and it
says that; an inactive slot's held-back WAL is said."""

from __future__ import annotations

import threading
import time
from typing import Any

import psycopg
import pytest

from bench.topology.standby import PrimaryWithStandby
from queueguard.engine import topology
from queueguard.engine.apply.session import Limits
from queueguard.engine.online import rebuild
from queueguard.engine.online.choose import REBUILD, Form
from queueguard.engine.online.context import Context
from queueguard.engine.online.rebuild.copy import Throttle, hold_for_standbys

Events = list[tuple[float, str, int, int | None]]


def _timeline(events: Events) -> list[tuple[Any, ...]]:
    return [(round(t - events[0][0], 3), *rest) for t, *rest in events]


def _recorder(events: Events) -> Any:
    def progress(phase: str, done: int, total: int | None) -> None:
        events.append((time.monotonic(), phase, done, total))

    return progress


def test_with_no_standby_the_throttle_says_it_has_nothing_to_watch(empty_db: str) -> None:
    events: Events = []
    throttle = Throttle(max_lag_s=1.0, watch=topology.LagWatch())
    with psycopg.connect(empty_db) as conn:
        ctx = Context(conn, Limits())
        hold_for_standbys(ctx, throttle, _recorder(events))
        hold_for_standbys(ctx, throttle, _recorder(events))  # said once
    said = [phase for _, phase, _, _ in events]
    assert said == ["standby lag: no streaming standby connected, --max-lag has nothing to watch"]


@pytest.mark.slow
def test_the_rebuild_waits_for_a_paused_standby_and_never_swaps_while_it_lags() -> None:
    with PrimaryWithStandby() as pair:
        primary, standby = pair.primary_dsn(), pair.standby_dsn()
        with psycopg.connect(primary, autocommit=True) as conn:
            conn.execute("CREATE TABLE items (id bigint PRIMARY KEY, v int NOT NULL)")
            conn.execute("INSERT INTO items SELECT g, g FROM generate_series(1, 200000) g")
            # a slot nobody streams from: the WAL it holds back is said
            conn.execute("SELECT pg_create_physical_replication_slot('gone_standby', true)")
        pair.wait_replayed()
        with psycopg.connect(standby, autocommit=True) as conn:
            conn.execute("SELECT pg_wal_replay_pause()")
        events: Events = []
        failed: list[BaseException] = []

        def run() -> None:
            try:
                with psycopg.connect(primary) as conn:
                    rebuild.run(
                        Context(conn, Limits()),
                        Form(REBUILD, "items", "ALTER TABLE items ALTER COLUMN v TYPE bigint"),
                        Throttle(batch_size=5000, max_lag_s=0.3),
                        _recorder(events),
                    )
            except BaseException as exc:  # reported by the test, not lost in the thread
                failed.append(exc)

        worker = threading.Thread(target=run, daemon=True)
        worker.start()
        deadline = time.monotonic() + 60
        while not any(phase == "standby lag" for _, phase, _, _ in events):
            timeline = _timeline(events)[-12:]
            assert worker.is_alive() and time.monotonic() < deadline, (failed, timeline)
            time.sleep(0.1)
        time.sleep(2.0)  # the standby stays paused: the rebuild must not swap meanwhile
        assert worker.is_alive(), (failed, events)
        assert not [e for e in events if e[1] == "swap" and e[2] == 1]
        waiting = [e for e in events if e[1] == "standby lag"]
        assert waiting[-1][2] > 300 and waiting[-1][3] == 300  # ms behind, the limit
        resumed = time.monotonic()
        with psycopg.connect(standby, autocommit=True) as conn:
            conn.execute("SELECT pg_wal_replay_resume()")
        worker.join(120)
        assert not worker.is_alive() and not failed, failed
        swapped = [t for t, phase, done, _ in events if phase == "swap" and done == 1]
        assert swapped and swapped[0] > resumed
        assert any(phase.startswith("standby slot gone_standby") for _, phase, _, _ in events)
        with psycopg.connect(primary) as conn:
            kind = conn.execute(
                "SELECT format_type(atttypid, atttypmod) FROM pg_attribute "
                "WHERE attrelid = 'items'::regclass AND attname = 'v'"
            ).fetchone()
            assert kind == ("bigint",)
            conn.execute("SELECT pg_drop_replication_slot('gone_standby')")
