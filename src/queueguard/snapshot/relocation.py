"""Migration 004 as a pure function over a format-3 snapshot document.

The memory store applies this when it restores a v0.3 snapshot; the result must equal what
the SQL migration does to the same data (a differential test holds them together). The steps
are 1-4 of docs/schema-history.md "004": directives, relocation, counter repair, fence.
"""

from __future__ import annotations

import copy
from typing import Any

from queueguard.core.keys import AUTO_VERSION
from queueguard.core.protocol import PROTOCOL

Doc = dict[str, Any]
UNVERSIONED = {"behavior": "unversioned", "deploymentVersion": None}
_AUTO_SUFFIX = "@" + AUTO_VERSION


def directives(doc: Doc) -> dict[str, dict[str, Any]]:
    """History's version directive per run id (the text form tasks carry)."""
    return {
        e["runId"]: {
            "behavior": e["versioningBehavior"],
            "deploymentVersion": e.get("deploymentVersion"),
        }
        for e in doc.get("history", {}).get("executions", [])
    }


def _with_directive(data: dict[str, Any], by_run: dict[str, dict[str, Any]]) -> dict[str, Any]:
    out = copy.deepcopy(data)
    task = out.get("task")
    if isinstance(task, dict):
        run_id = task.get("runId")
        found = by_run.get(run_id) if isinstance(run_id, str) else None
        task["versionDirective"] = copy.deepcopy(found or UNVERSIONED)
    return out


def apply_004(doc3: Doc) -> Doc:
    """Return the format-4 document 004 makes of a (validated) format-3 document."""
    by_run = directives(doc3)
    queues = {q["physicalQueue"]: copy.deepcopy(q) for q in doc3["queues"]}
    for q in queues.values():
        q["tasks"] = sorted(q["tasks"], key=lambda t: t["taskId"])
        if not q["physicalQueue"].endswith(_AUTO_SUFFIX):
            q["tasks"] = [
                {"taskId": t["taskId"], "data": _with_directive(t["data"], by_run)}
                for t in q["tasks"]
            ]
    for key in sorted(k for k, q in queues.items() if k.endswith(_AUTO_SUFFIX) and q["tasks"]):
        source = queues[key]
        dest_key = key[: -len(_AUTO_SUFFIX)]
        dest = queues.setdefault(
            dest_key,
            {"physicalQueue": dest_key, "rangeId": 0, "ackLevel": 0, "lastTaskId": 0, "tasks": []},
        )
        base = max([dest["lastTaskId"], *(t["taskId"] for t in dest["tasks"])])
        for offset, task in enumerate(source["tasks"], start=1):
            dest["tasks"].append(
                {"taskId": base + offset, "data": _with_directive(task["data"], by_run)}
            )
        dest["lastTaskId"] = base + len(source["tasks"])
        drained = max(source["lastTaskId"], source["tasks"][-1]["taskId"])
        source.update(lastTaskId=drained, ackLevel=drained, tasks=[])
    for q in queues.values():
        if q["tasks"]:
            q["lastTaskId"] = max(q["lastTaskId"], max(t["taskId"] for t in q["tasks"]))
        q["rangeId"] += 1
    result = copy.deepcopy(doc3)
    result["formatVersion"] = 4
    result["queues"] = [queues[k] for k in sorted(queues)]
    result["protocol"] = {"min": PROTOCOL, "max": PROTOCOL}
    return result
