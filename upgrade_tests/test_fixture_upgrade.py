"""Every golden fixture upgrades to its golden state, to head and step by step, losing nothing."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest

from queueguard import revisions, snapshot
from queueguard.engine import catalog
from queueguard.engine.checksums import table_checksums
from queueguard.pg.connect import connection
from queueguard.queue_schema import state
from queueguard.queue_schema.golden import Fixture
from queueguard.queue_schema.runner import upgrade
from queueguard.queue_schema.verify.report import state_diff
from queueguard.snapshot.relocation import UNVERSIONED, directives

from .conftest import rows

Db = Callable[..., str]


def _export(dsn: str) -> dict[str, Any]:
    with connection(dsn) as conn:
        return state.export_database(conn)


def _old_rows(dsn: str, revision: str) -> list[tuple[str, dict[str, Any]]]:
    """(source queue or legacy components, payload) of every task row before the upgrade."""
    if revision >= "003":
        return [(r[0], r[1]) for r in rows(dsn, "SELECT physical_queue, data FROM tasks")]
    return [
        ("/".join(map(str, r[:5])), r[5])
        for r in rows(
            dsn, "SELECT namespace, task_queue, task_type, partition, version, data FROM tasks"
        )
    ]


def _strip(data: dict[str, Any]) -> str:
    d = json.loads(json.dumps(data))
    d["task"].pop("versionDirective")
    return json.dumps(d, sort_keys=True)


def test_schema_fingerprint_matches_manifest(fixture: Fixture, queueguard_database: Db) -> None:
    loaded = queueguard_database(fixture=fixture.name)
    migrated = queueguard_database(revision=fixture.revision)
    for dsn in (loaded, migrated):
        with connection(dsn) as conn:
            assert catalog.fingerprint(conn) == fixture.manifest["schema_sha256"]


@pytest.mark.parametrize("mode", ["to-head", "step-by-step"])
def test_upgrade_reaches_golden_state(fixture: Fixture, queueguard_database: Db, mode: str) -> None:
    dsn = queueguard_database(fixture=fixture.name)
    if mode == "to-head":
        assert upgrade(dsn, progress=False).after == "004"
    else:
        for revision in (r.id for r in revisions.packaged().pending(fixture.revision, "head")):
            assert upgrade(dsn, to=revision, progress=False).after == revision
    actual = _export(dsn)
    assert snapshot.normalise(actual) == snapshot.normalise(fixture.expected_head), state_diff(
        fixture.expected_head, actual
    )


def test_state_survives(fixture: Fixture, queueguard_database: Db) -> None:
    dsn = queueguard_database(fixture=fixture.name)
    before = _old_rows(dsn, fixture.revision)
    user_data_before = (
        rows(
            dsn,
            "SELECT namespace, task_queue, version, data::text, updated_at "
            "FROM task_queue_user_data ORDER BY 1, 2",
        )
        if fixture.revision >= "002"
        else []
    )
    created_before = Counter(r[0] for r in rows(dsn, "SELECT created_at FROM tasks"))
    upgrade(dsn, progress=False)
    after = _export(dsn)
    by_run = directives(after)
    # every task row either kept or relocated: same payload plus the directive, exactly once
    after_payloads = Counter(_strip(t["data"]) for q in after["queues"] for t in q["tasks"])
    assert after_payloads == Counter(json.dumps(d, sort_keys=True) for _, d in before)
    for q in after["queues"]:
        ids = [t["taskId"] for t in q["tasks"]]
        assert len(ids) == len(set(ids)), f"{q['physicalQueue']}: ids collide"
        assert not ids or max(ids) <= q["lastTaskId"]
        assert 0 <= q["ackLevel"] <= q["lastTaskId"]
        assert q["rangeId"] >= 1, "every queue is fenced"
        assert not (q["physicalQueue"].endswith("@auto") and ids), "auto backlog relocated"
        for t in q["tasks"]:
            run = t["data"]["task"]["runId"]
            assert t["data"]["task"]["versionDirective"] == by_run.get(run, UNVERSIONED)
    assert Counter(r[0] for r in rows(dsn, "SELECT created_at FROM tasks")) == created_before
    if user_data_before:
        assert (
            rows(
                dsn,
                "SELECT namespace, task_queue, version, data::text, updated_at "
                "FROM task_queue_user_data ORDER BY 1, 2",
            )
            == user_data_before
        )
    assert after["protocol"] == {"min": 4, "max": 4}


def test_upgrade_twice_changes_nothing(fixture: Fixture, queueguard_database: Db) -> None:
    dsn = queueguard_database(fixture=fixture.name)
    upgrade(dsn, progress=False)
    with connection(dsn) as conn:
        before = table_checksums(conn)
    report = upgrade(dsn, progress=False)
    with connection(dsn) as conn:
        assert table_checksums(conn) == before
    assert report.applied == [] and report.before == report.after == "004"


def test_upgraded_catalog_equals_fresh_install(fixture: Fixture, queueguard_database: Db) -> None:
    fresh = queueguard_database(revision="004")
    upgraded = queueguard_database(fixture=fixture.name)
    upgrade(upgraded, progress=False)
    with connection(fresh) as a, connection(upgraded) as b:
        differences = catalog.diff(catalog.introspect(a), catalog.introspect(b))
    assert not differences, "\n".join(differences)
