"""`queueguard rehearse`: the upgrade on a copy, judged by conservation laws."""

from __future__ import annotations

import copy
import json
from collections import Counter
from collections.abc import Callable

import pytest

from queueguard.cli import main
from queueguard.engine.checksums import table_checksums
from queueguard.pg.connect import connection
from queueguard.queue_schema.golden import get
from queueguard.queue_schema.rehearse import _payload_key, check_conservation
from queueguard.queue_schema.rehearse import of_own_set as rehearse

Db = Callable[..., str]


@pytest.mark.parametrize("name", ["v0.1", "v0.3"])
def test_rehearsal_passes_and_never_writes_the_source(
    name: str, queueguard_database: Db, queueguard_server: str
) -> None:
    source = queueguard_database(fixture=name)
    with connection(source) as conn:
        before = table_checksums(conn)
    result = rehearse(source, queueguard_server)
    assert result.ok, result.violations
    assert result.method == "template"
    assert result.source_revision == get(name).revision
    assert any(q["queue"] == "default/orders/workflow/0" for q in result.queues)
    with connection(source) as conn:
        assert table_checksums(conn) == before


def test_rehearsal_falls_back_to_a_dump_while_the_source_is_busy(
    queueguard_database: Db, queueguard_server: str
) -> None:
    source = queueguard_database(fixture="v0.3")
    with connection(source) as busy:  # another session: TEMPLATE cloning is not allowed
        busy.execute("SELECT 1")
        result = rehearse(source, queueguard_server)
    assert result.ok, result.violations
    assert result.method == "dump"


def test_rehearse_cli_json(
    queueguard_database: Db, queueguard_server: str, capsys: pytest.CaptureFixture[str]
) -> None:
    source = queueguard_database(fixture="v0.2")
    code = main(["rehearse", "--dsn", source, "--scratch-dsn", queueguard_server, "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert code == 0 and doc["ok"] and doc["schemaVersion"] == 1


def _golden_pair() -> tuple[Counter[str], dict[str, object], dict[str, object]]:
    fixture = get("v0.3")
    before = json.loads((fixture.folder.parent / "snapshots" / "v3_golden.json").read_text())
    after = fixture.expected_head
    payloads = Counter(_payload_key(t["data"]) for q in before["queues"] for t in q["tasks"])
    return payloads, before, after


def test_conservation_laws_hold_on_the_golden_upgrade() -> None:
    payloads, before, after = _golden_pair()
    assert check_conservation(payloads, before, after) == []


def test_conservation_laws_catch_loss_duplication_and_a_missed_fence() -> None:
    payloads, before, after = _golden_pair()
    broken = copy.deepcopy(after)
    queue = next(q for q in broken["queues"] if q["physicalQueue"] == "default/orders/workflow/0")
    queue["tasks"].pop()  # a lost row
    queue["tasks"].append({**queue["tasks"][1], "taskId": 4})  # a duplicated payload and id
    broken["queues"][0]["rangeId"] -= 1
    problems = "\n".join(check_conservation(payloads, before, broken))
    assert "duplicate task ids" in problems
    assert "duplicated or invented" in problems and "lost" in problems
    assert "(fence)" in problems


def test_fixtures_load_refuses_a_non_empty_database(
    queueguard_database: Db, capsys: pytest.CaptureFixture[str]
) -> None:
    target = queueguard_database(fixture="v0.1")
    with connection(target) as conn:
        before = table_checksums(conn)
    assert main(["fixtures", "load", "v0.3", "--dsn", target]) == 1
    assert "not empty" in capsys.readouterr().err
    with connection(target) as conn:
        assert table_checksums(conn) == before
