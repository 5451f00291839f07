"""002 and 003 on seeded data in the released v0.1/v0.2 shapes."""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from typing import Any

import psycopg
import pytest
from psycopg.types.json import Jsonb

from queueguard.core import keys
from queueguard.engine import catalog
from queueguard.errors import MigrationRefused

from .seeds import (
    RUN_PLAIN,
    SPOOL_QUEUES,
    payload,
    seed_executions,
    seed_spool,
    seed_user_data,
)
from .support import MakeDb, assert_same_catalog, protocol, raw_dump, revision, rows, up


def test_002_keeps_v1_data(make_db: MakeDb) -> None:
    dsn = make_db()
    up(dsn, to="001")
    seed_executions(dsn)
    seed_spool(dsn)
    before = catalog.contents(dsn)
    up(dsn, to="002")
    after = catalog.contents(dsn)
    assert after.pop("task_queue_user_data") == []
    before.pop("queueguard_version")
    after.pop("queueguard_version")
    assert after == before


def test_003_rebuilds_the_spool_per_queue(make_db: MakeDb) -> None:
    dsn = make_db()
    up(dsn, to="002")
    seed_executions(dsn)
    seed_spool(dsn)
    seed_user_data(dsn)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("SET TIME ZONE 'UTC'")
        spool = conn.execute(
            "SELECT namespace, task_queue, task_type, partition, version, data, created_at "
            "FROM tasks ORDER BY delivery_id"
        ).fetchall()
    kept = {t: catalog.contents(dsn)[t] for t in ("executions", "scheduled_tasks")}
    user_data = catalog.contents(dsn)["task_queue_user_data"]

    assert up(dsn, to="003").applied == ["003"]

    expected: dict[str, list[tuple[Any, str]]] = defaultdict(list)
    components = {}
    for ns, tq, ttype, part, version, data, created in spool:
        key = keys.legacy_queue(ns, tq, ttype, part, version)  # Python's encoding
        expected[key].append((data, created.isoformat()))
        components[key] = (ns, tq, ttype, part, version)
    assert len(expected) == len(SPOOL_QUEUES)
    assert "ns%2Fone%20%40%25%27%20x/queue%20%C3%BCn%C3%AF%20%E6%97%A5%E6%9C%AC%20%2F%40%25" in {
        k.split("/activity")[0] for k in expected
    }
    assert "%2541/a%252fb/workflow/0" in expected  # already-quoted-looking names, quoted again
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("SET TIME ZONE 'UTC'")
        stored = conn.execute(
            "SELECT physical_queue, task_id, data, created_at FROM tasks "
            "ORDER BY physical_queue, task_id"
        ).fetchall()
        meta = conn.execute(
            "SELECT physical_queue, namespace, task_queue, task_type, partition, version, "
            "range_id, ack_level, last_task_id FROM task_queues"
        ).fetchall()
    assert len(stored) == len(spool)
    got: dict[str, list[tuple[int, Any, str]]] = defaultdict(list)
    for key, tid, data, created in stored:
        got[key].append((tid, data, created.isoformat()))
    assert set(got) == set(expected)
    for key, items in got.items():
        assert [i[0] for i in items] == list(range(1, len(items) + 1)), key  # consecutive
        assert [(d, c) for _, d, c in items] == expected[key], key  # delivery order, created_at
    payloads = Counter(json.dumps(d, sort_keys=True) for *_, d, _ in spool)
    assert Counter(json.dumps(d, sort_keys=True) for _, _, d, _ in stored) == payloads
    # Metadata only for queues with rows: last = count, ack 0, range 0, components verbatim.
    assert {m[0]: m[1:] for m in meta} == {
        key: (*components[key], 0, 0, len(items)) for key, items in expected.items()
    }
    assert protocol(dsn) == [(3, 3)]
    after = catalog.contents(dsn)
    assert {t: after[t] for t in kept} == kept
    assert after["task_queue_user_data"] == user_data


def test_003_on_an_empty_spool_creates_no_queue(make_db: MakeDb) -> None:
    dsn = make_db()
    up(dsn, to="003")
    assert rows(dsn, "SELECT count(*) FROM task_queues") == [(0,)]


def test_003_refuses_invalid_legacy_components_and_changes_nothing(make_db: MakeDb) -> None:
    dsn = make_db()
    up(dsn, to="002")
    seed_executions(dsn)
    seed_spool(dsn, rounds=1)
    # Empty namespace, empty task queue, a version neither '', 'auto' nor dotted.
    bad = [
        ("", "q", "workflow", 0, ""),
        ("ns", "", "activity", 1, ""),
        ("ns", "q", "workflow", 0, "v1"),
    ]
    with psycopg.connect(dsn, autocommit=True) as conn, conn.cursor() as cur:
        cur.executemany(
            "INSERT INTO tasks (namespace, task_queue, task_type, partition, version, data) "
            "VALUES (%s, %s, %s, %s, %s, %s)",
            [(*b, Jsonb(payload(RUN_PLAIN, "wf-bad"))) for b in bad],
        )
    schema_before, data_before = catalog.introspect(dsn), raw_dump(dsn)

    with pytest.raises(MigrationRefused) as refused:
        up(dsn)
    assert refused.value.revision == "003"
    [finding] = refused.value.findings
    assert finding.code == "data.legacy_components_invalid" and finding.count == 3
    assert {(s["namespace"], s["task_queue"], s["version"]) for s in finding.samples} == {
        (b[0], b[1], b[4]) for b in bad
    }
    assert "data.legacy_components_invalid" in str(refused.value)
    assert revision(dsn) == "002"
    assert_same_catalog(schema_before, catalog.introspect(dsn), "after a refused 003")
    assert raw_dump(dsn) == data_before
