"""Hostile snapshot documents: arbitrary JSON, raw bytes, valid format-3/4 documents built
from hostile names, and mutations of them and of the golden snapshot."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from datetime import UTC
from typing import Any

from hypothesis import strategies as st

from bench.chaos.fuzz.hostile_names import (
    INJECTIONS,
    components,
    names,
    queue_of,
    storable,
    versions,
)
from queueguard import snapshot
from queueguard.core.store import Execution
from queueguard.resources import fixtures_dir

json_leaves = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.integers(min_value=2**62, max_value=2**80),
    st.floats(),
    st.text(max_size=12),
    st.sampled_from([*INJECTIONS, "\x00", "\ud800", "a\x00b"]),
)
json_values = st.recursive(
    json_leaves,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=16,
)
storable_json = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(),
        st.floats(allow_nan=False, allow_infinity=False),
        st.text(max_size=12).filter(storable),
        st.sampled_from(INJECTIONS),
    ),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(st.text(max_size=8).filter(storable), inner, max_size=4)
    ),
    max_leaves=16,
)
json_objects = st.dictionaries(st.text(max_size=8), json_values, max_size=4)
timestamps = st.datetimes(timezones=st.just(UTC)).map(
    lambda d: d.isoformat(timespec="microseconds").replace("+00:00", "Z")
)


@st.composite
def documents(draw: st.DrawFn) -> dict[str, Any]:
    """A (mostly) valid format-4 or format-3 document built from hostile names."""
    fmt = draw(st.sampled_from([4, 4, 3]))
    runs = draw(st.lists(st.uuids().map(str), max_size=3, unique=True))
    executions = [
        Execution(
            run,
            draw(names),
            draw(names),
            draw(st.sampled_from(snapshot.STATUSES)),
            draw(st.sampled_from(snapshot.BEHAVIORS)),
            draw(st.none() | versions),
        ).as_record()
        for run in runs
    ]
    scheduled = []
    for run in runs:
        for event in draw(st.lists(st.integers(-(2**63), 2**63 - 1), max_size=2, unique=True)):
            scheduled.append(
                {
                    "runId": run,
                    "scheduledEventId": event,
                    "kind": draw(st.sampled_from(["workflow", "activity"])),
                    "startedAt": draw(st.none() | timestamps),
                }
            )
    queues, keys = [], set()
    for comp in draw(st.lists(components, max_size=3)):
        key = queue_of(comp).key
        if key in keys:
            continue
        keys.add(key)
        last = draw(st.integers(0, 2**63 - 1) | st.integers(0, 6))
        ack = draw(st.integers(0, last))
        ids = sorted(draw(st.sets(st.integers(ack + 1, max(ack + 1, last)), max_size=3)))
        ids = [i for i in ids if i <= last]
        queues.append(
            {
                "physicalQueue": key,
                "rangeId": draw(st.integers(0, 2**63 - 1)),
                "ackLevel": ack,
                "lastTaskId": last,
                "tasks": [{"taskId": i, "data": draw(json_objects)} for i in ids],
            }
        )
    user_data, families = [], set()
    for ns, tq in draw(st.lists(st.tuples(names, names), max_size=2)):
        if (ns, tq) not in families:
            families.add((ns, tq))
            user_data.append(
                {
                    "namespace": ns,
                    "taskQueue": tq,
                    "version": draw(st.integers(1, 2**63 - 1)),
                    "data": draw(json_values),
                }
            )
    return {
        "formatVersion": fmt,
        "queues": queues,
        "userData": user_data,
        "history": {"executions": executions, "scheduledTasks": scheduled},
        "protocol": {"min": 4, "max": 4} if fmt == 4 else {"min": 3, "max": 3},
    }


def _paths(node: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    yield path
    if isinstance(node, dict):
        for k, v in node.items():
            yield from _paths(v, (*path, k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _paths(v, (*path, i))


HOSTILE_VALUES: list[Any] = [
    None,
    -1,
    0,
    2**63,
    2**31,
    -(2**63) - 1,
    1.5,
    True,
    "",
    "\x00",
    "a\x00b",
    "\ud800",
    "not a date",
    "2026-13-45T99:99:99Z",
    [],
    {},
    {"deliveryId": 1},
    "auto",
    "ns/q/workflow/0@auto",
    float("nan"),
    float("inf"),
]


@st.composite
def mutated_documents(draw: st.DrawFn) -> dict[str, Any]:
    if draw(st.booleans()):
        doc = draw(documents())
    else:
        golden_doc = json.loads((fixtures_dir() / "snapshots" / "v3_golden.json").read_text())
        doc = golden_doc if draw(st.booleans()) else snapshot.upgrade_document(golden_doc)
    doc = copy.deepcopy(doc)
    for _ in range(draw(st.integers(1, 3))):
        paths = list(_paths(doc))[1:]
        if not paths:
            break
        path = draw(st.sampled_from(paths))
        parent = doc
        for step in path[:-1]:
            parent = parent[step]
        op = draw(st.sampled_from(["set", "set", "delete", "add"]))
        # a copy: a later step may mutate inside the inserted value, and strategies hand out
        # shared objects (mutating them would change what later examples draw)
        value = copy.deepcopy(draw(st.sampled_from(HOSTILE_VALUES) | json_values))
        if op == "delete":
            del parent[path[-1]]
        elif op == "add" and isinstance(parent, dict):
            parent[draw(st.sampled_from(["deliveryId", "extra", "taskId", "physicalQueue"]))] = (
                value
            )
        else:
            parent[path[-1]] = value
    return doc


def dump(doc: Any) -> str:
    return json.dumps(doc, ensure_ascii=draw_ascii(doc))


def draw_ascii(doc: Any) -> bool:
    """Lone surrogates only survive an ASCII dump (\\ud800 escapes); others go out as UTF-8."""
    try:
        json.dumps(doc, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


snapshot_inputs = st.one_of(
    mutated_documents().map(dump),
    documents().map(dump),
    json_values.map(dump),
    st.binary(max_size=64),
    st.text(max_size=40),
    st.integers(1, 3000).map(lambda n: "[" * n + "]" * n),
    st.integers(1, 3000).map(lambda n: '{"formatVersion": 4, "queues": ' + "[" * n + "]" * n + "}"),
)
