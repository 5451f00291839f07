"""Snapshot import: validation, legacy rejection, and 004 applied in memory."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from queueguard.core.keys import legacy_queue
from queueguard.errors import LegacySnapshotError, SnapshotError
from queueguard.snapshot import export_memory, import_memory, parse, upgrade_document
from queueguard.snapshot.relocation import apply_004
from queueguard.stores.memory import MemoryDatabase, MemoryStore

RUN = "7a1d0c3e-57b2-4c6e-9f3a-2b8c6d5e4f10"


def _doc(version: int = 4, queues: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {
        "formatVersion": version,
        "queues": queues
        if queues is not None
        else [
            {
                "physicalQueue": "ns/fam/workflow/0",
                "rangeId": 1,
                "ackLevel": 0,
                "lastTaskId": 1,
                "tasks": [{"taskId": 1, "data": {"task": {"runId": RUN}}}],
            }
        ],
        "userData": [{"namespace": "ns", "taskQueue": "fam", "version": 1, "data": {}}],
        "history": {
            "executions": [
                {
                    "runId": RUN,
                    "namespace": "ns",
                    "workflowId": "wf",
                    "status": "running",
                    "versioningBehavior": "auto_upgrade",
                    "deploymentVersion": "d.1",
                }
            ],
            "scheduledTasks": [
                {"runId": RUN, "scheduledEventId": 1, "kind": "workflow", "startedAt": None}
            ],
        },
        "protocol": {"min": version, "max": version},
    }


def test_valid_format4_round_trips_through_memory() -> None:
    doc = parse(json.dumps(_doc()))
    assert export_memory(import_memory(doc)) == doc


def test_memory_export_is_importable_after_use() -> None:
    store = MemoryStore()
    from queueguard.core.keys import PhysicalQueue

    q = PhysicalQueue("ns", "fam")
    state = store.load_queue(q)
    store.append(q, state.range_id, [{"task": {"runId": RUN}}])
    doc = export_memory(store.db)
    assert parse(json.dumps(doc)) == doc


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{", "not a JSON document"),
        ("[]", "a snapshot is a JSON object"),
        ('{"queues": []}', "lacks formatVersion"),
        ('{"formatVersion": "4"}', "must be an integer"),
        ('{"formatVersion": true}', "must be an integer"),
        ('{"formatVersion": 9}', "unknown formatVersion 9"),
    ],
)
def test_malformed_documents_are_rejected(text: str, message: str) -> None:
    with pytest.raises(SnapshotError, match=message):
        parse(text)


def _mutate(path: str, value: Any) -> dict[str, Any]:
    doc = _doc()
    target: Any = doc
    parts = path.split(".")
    for part in parts[:-1]:
        target = target[int(part)] if part.isdigit() else target[part]
    last = parts[-1]
    target[int(last) if last.isdigit() else last] = value
    return doc


@pytest.mark.parametrize(
    ("path", "value", "record"),
    [
        ("queues.0.ackLevel", 5, "queues[0]"),
        ("queues.0.rangeId", -1, "queues[0].rangeId"),
        ("queues.0.lastTaskId", "1", "queues[0].lastTaskId"),
        ("queues.0.tasks.0.taskId", 0, "queues[0].tasks[0].taskId"),
        ("queues.0.tasks.0.taskId", 7, "queues[0].tasks[0].taskId"),
        ("queues.0.tasks.0.data", [1], "queues[0].tasks[0].data"),
        ("queues.0.physicalQueue", "ns/fam/workflow/00", "queues[0].physicalQueue"),
        ("queues.0.physicalQueue", "ns/fam/workflow/0@auto", "queues[0]"),
        ("userData.0.version", 0, "userData[0].version"),
        ("history.executions.0.runId", RUN.upper(), "history.executions[0].runId"),
        ("history.executions.0.status", "sleeping", "history.executions[0].status"),
        (
            "history.scheduledTasks.0.runId",
            "5d0c2f0e-3b7a-4c1e-9e7f-0a1b2c3d4e5f",
            "history.scheduledTasks[0].runId",
        ),
    ],
)
def test_invalid_records_are_named(path: str, value: Any, record: str) -> None:
    with pytest.raises(SnapshotError) as err:
        upgrade_document(_mutate(path, value))
    assert err.value.record == record


def test_duplicate_task_ids_are_rejected() -> None:
    doc = _doc()
    doc["queues"][0]["lastTaskId"] = 2
    doc["queues"][0]["tasks"].append({"taskId": 1, "data": {}})
    with pytest.raises(SnapshotError, match="duplicate task id 1"):
        upgrade_document(doc)


@pytest.mark.parametrize("version", [1, 2])
def test_old_format_versions_are_legacy(version: int) -> None:
    with pytest.raises(LegacySnapshotError, match="pre-003 export"):
        upgrade_document({"formatVersion": version, "tasks": []})


def test_delivery_id_without_format_is_legacy() -> None:
    with pytest.raises(LegacySnapshotError, match=r"deliveryId at \$\.tasks\[0\]"):
        upgrade_document({"tasks": [{"deliveryId": 1, "data": {}}]})


def test_last_of_ten_thousand_records_makes_a_format3_file_legacy() -> None:
    tasks = [{"taskId": i, "data": {"task": {"runId": RUN}}} for i in range(1, 10_001)]
    tasks[-1]["deliveryId"] = 10_000
    doc = _doc(
        3,
        [
            {
                "physicalQueue": "ns/fam/workflow/0@auto",
                "rangeId": 1,
                "ackLevel": 0,
                "lastTaskId": 10_000,
                "tasks": tasks,
            }
        ],
    )
    with pytest.raises(LegacySnapshotError) as err:
        parse(json.dumps(doc))
    assert "queues[0].tasks[9999]" in str(err.value)
    assert "Nothing was imported" in str(err.value)


def test_format3_restore_applies_004() -> None:
    src = legacy_queue("ns", "fam", "workflow", 0, "auto")
    dst = legacy_queue("ns", "fam", "workflow", 0, "")
    doc3 = _doc(
        3,
        [
            {
                "physicalQueue": dst,
                "rangeId": 4,
                "ackLevel": 1,
                "lastTaskId": 2,
                "tasks": [
                    {"taskId": 2, "data": {"task": {"runId": "x"}}},
                    {"taskId": 3, "data": {"task": {"runId": RUN}}},
                ],
            },
            {
                "physicalQueue": src,
                "rangeId": 2,
                "ackLevel": 0,
                "lastTaskId": 1,
                "tasks": [
                    {"taskId": 1, "data": {"task": {"runId": RUN}, "n": 1}},
                    {"taskId": 2, "data": {"task": {"runId": RUN}, "n": 2}},
                ],
            },
        ],
    )
    doc4 = upgrade_document(doc3)
    queues = {q["physicalQueue"]: q for q in doc4["queues"]}
    dest, source = queues[dst], queues[src]
    assert [t["taskId"] for t in dest["tasks"]] == [2, 3, 4, 5]  # fresh ids above max(2, 3)
    assert [t["data"].get("n") for t in dest["tasks"]] == [None, None, 1, 2]
    assert (dest["rangeId"], dest["ackLevel"], dest["lastTaskId"]) == (5, 1, 5)
    assert (source["rangeId"], source["ackLevel"], source["lastTaskId"], source["tasks"]) == (
        3,
        2,
        2,
        [],
    )
    directive = {"behavior": "auto_upgrade", "deploymentVersion": "d.1"}
    assert dest["tasks"][0]["data"]["task"]["versionDirective"] == {
        "behavior": "unversioned",
        "deploymentVersion": None,
    }
    assert all(t["data"]["task"]["versionDirective"] == directive for t in dest["tasks"][1:])
    assert doc4["protocol"] == {"min": 4, "max": 4} and doc4["formatVersion"] == 4


# property-based: generated format-3 documents ---------------------------------------
names = st.text(
    st.characters(codec="utf-8", exclude_categories=("Cs",), exclude_characters="\x00"),
    min_size=1,
    max_size=8,
)


@st.composite
def format3_docs(draw: st.DrawFn) -> dict[str, Any]:
    queues: dict[str, dict[str, Any]] = {}
    for _ in range(draw(st.integers(1, 5))):
        ns, fam = draw(names), draw(names)
        version = draw(st.sampled_from(["", "auto", "dep.1"]))
        key = legacy_queue(ns, fam, "workflow", draw(st.integers(0, 3)), version)
        ids = sorted(draw(st.sets(st.integers(1, 30), max_size=6)))
        last = draw(st.integers(0, 30))
        ack = draw(st.integers(0, last))
        queues[key] = {
            "physicalQueue": key,
            "rangeId": draw(st.integers(0, 5)),
            "ackLevel": ack,
            "lastTaskId": last,
            "tasks": [{"taskId": i, "data": {"task": {"runId": RUN}, "i": i}} for i in ids],
        }
    return _doc(3, list(queues.values()))


@given(format3_docs())
@settings(max_examples=150, deadline=None)
def test_generated_format3_documents_conserve_every_task(doc3: dict[str, Any]) -> None:
    before = sorted(
        json.dumps(t["data"], sort_keys=True) for q in doc3["queues"] for t in q["tasks"]
    )
    doc4 = upgrade_document(copy.deepcopy(doc3))
    after = []
    for q in doc4["queues"]:
        ids = [t["taskId"] for t in q["tasks"]]
        assert len(ids) == len(set(ids))
        assert not ids or max(ids) <= q["lastTaskId"]
        assert 0 <= q["ackLevel"] <= q["lastTaskId"]
        assert not (q["physicalQueue"].endswith("@auto") and ids)
        for t in q["tasks"]:
            data = copy.deepcopy(t["data"])
            assert data["task"].pop("versionDirective")["behavior"] == "auto_upgrade"
            after.append(json.dumps(data, sort_keys=True))
    assert sorted(after) == before
    assert apply_004(doc3) == doc4  # deterministic
    # a format-4 export of the restored memory store validates again
    restored = import_memory(doc4)
    assert isinstance(restored, MemoryDatabase)
    assert parse(json.dumps(export_memory(restored))) == export_memory(restored)
