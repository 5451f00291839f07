"""004 on seeded data in the released v0.3 shape; rerunning it; refusals; no downgrade."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import pytest
from alembic import command

from queueguard.errors import IrreversibleMigration, MigrationRefused
from queueguard.queue_schema import manifest
from queueguard.queue_schema.alembic_config import config as alembic_config_for
from queueguard.queue_schema.alembic_config import engine_for

from .seeds import (
    ACT_AUTO,
    AUTO,
    DEFAULT,
    DIRECTIVES,
    HOSTILE_AUTO,
    IDLE_AUTO,
    KEPT_STALE,
    PINNED,
    STALE_AUTO,
    V3_QUEUES,
    V3_ROWS,
    read_v4,
    reference_004,
    seed_v3,
)
from .support import (
    ALL,
    UNVERSIONED,
    MakeDb,
    execute,
    protocol,
    raw_dump,
    revision,
    rows,
    run_cli,
    up,
)


@pytest.fixture
def v3_db(make_db: MakeDb) -> str:
    dsn = make_db()
    up(dsn, to="003")
    seed_v3(dsn)
    return dsn


def test_004_relocates_stamps_repairs_and_fences(v3_db: str) -> None:
    report = up(v3_db)
    assert report.applied == ["004"] and (report.before, report.after) == ("003", "004")
    assert report.relocated == {AUTO[0]: 3, ACT_AUTO[0]: 3, STALE_AUTO[0]: 4, HOSTILE_AUTO[0]: 2}
    assert report.queues_fenced == len(V3_QUEUES) + 2  # two destinations were created

    queues, task_rows = read_v4(v3_db)
    expected_queues, expected_rows = reference_004(V3_QUEUES, V3_ROWS)
    assert queues == expected_queues
    assert task_rows == expected_rows

    # The facts the reference encodes, spelled out.
    default, auto = DEFAULT[0], AUTO[0]
    ids = sorted(t for k, t in task_rows if k == default)
    assert ids == [5, 6, 7, 8, 9, 10, 11]  # above last_task_id 6 *and* the highest row 8
    moved = [task_rows[(default, t)][0]["task"]["workflowId"] for t in (9, 10, 11)]
    assert moved == [d["task"]["workflowId"] for k, _, d, _ in V3_ROWS if k == auto]
    assert queues[default]["last_task_id"] == 11 and queues[default]["range_id"] == 4
    assert queues[auto] == {**V3_QUEUES[auto], "ack_level": 7, "range_id": 3}  # drained
    assert not any(k in (auto, ACT_AUTO[0], STALE_AUTO[0], HOSTILE_AUTO[0]) for k, _ in task_rows)
    created = ACT_AUTO[0].removesuffix("@auto")
    assert queues[created]["range_id"] == 1 and queues[created]["last_task_id"] == 3
    assert queues[STALE_AUTO[0]]["ack_level"] == queues[STALE_AUTO[0]]["last_task_id"] == 4
    assert queues[KEPT_STALE[0]]["last_task_id"] == 3  # repaired
    assert queues[IDLE_AUTO[0]] == {**V3_QUEUES[IDLE_AUTO[0]], "range_id": 5}
    fenced = {k: queues[k]["range_id"] - meta["range_id"] for k, meta in V3_QUEUES.items()}
    assert fenced == dict.fromkeys(V3_QUEUES, 1)
    # Every row (kept, pinned, relocated) carries its run's directive verbatim; a run History
    # does not know, a runId that is not a uuid, or one not in uuid::text form: unversioned.
    for data, _ in task_rows.values():
        run = data["task"]["runId"]
        assert data["task"]["versionDirective"] == DIRECTIVES.get(run, UNVERSIONED), run
    unknown = [d for d, _ in task_rows.values() if d["task"]["runId"] not in DIRECTIVES]
    assert len(unknown) == 4

    # Payloads are unchanged except for the directive.
    def canonical(data: Any) -> str:
        task = {k: v for k, v in data["task"].items() if k != "versionDirective"}
        return json.dumps({**data, "task": task}, sort_keys=True)

    stripped = Counter(canonical(d) for d, _ in task_rows.values())
    assert stripped == Counter(canonical(d) for _, _, d, _ in V3_ROWS)

    assert protocol(v3_db) == [(4, 4)]
    ledger = dict(rows(v3_db, "SELECT revision, sha256 FROM queueguard_migrations"))
    assert ledger == {e["revision"]: e["sha256"] for e in manifest.load()}
    assert ledger == {r: manifest.revision_sha256(r) for r in ALL}


def test_upgrading_an_upgraded_database_changes_nothing(v3_db: str) -> None:
    up(v3_db)
    before = raw_dump(v3_db)
    report = up(v3_db)
    assert report.applied == [] and report.after == "004"
    assert run_cli("upgrade", "--dsn", v3_db).returncode == 0
    assert raw_dump(v3_db) == before  # same rows, same ctid and xmin: nothing was rewritten


def test_004_refuses_on_a_broken_contract_and_changes_nothing(v3_db: str) -> None:
    execute(
        v3_db,
        "INSERT INTO tasks (physical_queue, task_id, data) VALUES ('ns/orphan/workflow/0', 1, "
        '\'{"task": {"runId": "x", "kind": "workflow"}}\'), '
        f"('{PINNED[0]}', 3, '[1, 2]')",
    )
    before = raw_dump(v3_db)
    with pytest.raises(MigrationRefused) as refused:
        up(v3_db)
    codes = {f.code for f in refused.value.findings}
    assert codes == {"data.task_without_queue", "data.payload_shape"}
    assert revision(v3_db) == "003" and raw_dump(v3_db) == before


def test_downgrade_refuses_with_a_message(head_db: str) -> None:
    engine = engine_for(head_db)
    try:
        for target in ("003", "base"):
            with engine.connect() as conn:
                cfg = alembic_config_for(connection=conn, progress=False)
                with pytest.raises(IrreversibleMigration, match="restoring the backup"):
                    command.downgrade(cfg, target)
                conn.rollback()
    finally:
        engine.dispose()
    assert revision(head_db) == "004"
