"""Memory snapshots: the whole store as one JSON document (docs/interfaces.md "Memory snapshots").

Format 4 is the current shape; format 3 (written by v0.3) is upgraded on restore by applying
004 in memory. Exports from before 003 — format 1 or 2, no formatVersion with deliveryId
records, or any record carrying `deliveryId` — are rejected as legacy. The whole document is
validated before anything is imported, so a bad last record imports nothing.
"""

from __future__ import annotations

import json
import re
import uuid
from datetime import datetime
from typing import Any

from queueguard.core import jsonb
from queueguard.core.keys import PhysicalQueue, decode
from queueguard.core.store import Execution
from queueguard.errors import InvalidQueueKey, LegacySnapshotError, SnapshotError
from queueguard.snapshot.relocation import apply_004
from queueguard.stores.memory import MemoryDatabase, QueueRecord, ScheduledTask

Doc = dict[str, Any]
CURRENT_FORMAT = 4
#: Ranges of the columns the numbers land in (bigint; int for the protocol).
BIGINT_MIN, BIGINT_MAX, INT_MAX = -(2**63), 2**63 - 1, 2**31 - 1
_TIMESTAMP = re.compile(
    r"[0-9]{4}-[0-9]{2}-[0-9]{2}[T ][0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]{1,6})?"
    r"(Z|[+-][0-9]{2}:[0-9]{2})"
)
STATUSES = ("running", "completed", "failed", "terminated")
BEHAVIORS = ("unversioned", "auto_upgrade", "pinned")


def parse(text: str | bytes) -> Doc:
    """Parse and validate a snapshot file's content; returns a format-4 document."""
    try:
        doc = json.loads(text, parse_constant=_reject_constant)
    except ValueError as exc:  # JSONDecodeError, UnicodeDecodeError, NaN/Infinity
        raise SnapshotError(f"not a JSON document ({exc})") from None
    except RecursionError:
        raise SnapshotError("not a JSON document (nested too deeply)") from None
    return upgrade_document(doc)


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def upgrade_document(doc: Any) -> Doc:
    """Validate any supported document and bring it to format 4."""
    if not isinstance(doc, dict):
        raise SnapshotError("a snapshot is a JSON object")
    legacy = _find_delivery_id(doc, "$")
    version: Any = doc.get("formatVersion")
    if legacy is not None or (_is_int(version) and version < 3):
        raise LegacySnapshotError(
            f"this is a pre-003 export (formatVersion {version!r}"
            + (f", deliveryId at {legacy}" if legacy else "")
            + "): tasks identified by deliveryId are not an import format for the current "
            "schema. Restore it with the v0.2 tooling, upgrade that database with "
            "`queueguard upgrade`, and export again. Nothing was imported."
        )
    if version is None:
        raise SnapshotError("the document lacks formatVersion")
    if not _is_int(version):
        raise SnapshotError(f"formatVersion must be an integer, got {version!r}")
    if version not in (3, CURRENT_FORMAT):
        raise SnapshotError(f"unknown formatVersion {version} (supported: 3, 4)")
    _validate(doc, version)
    if version == CURRENT_FORMAT:
        return doc
    upgraded = apply_004(doc)
    _validate(upgraded, CURRENT_FORMAT)  # e.g. relocated ids must still fit a bigint
    return upgraded


def _find_delivery_id(node: Any, path: str) -> str | None:
    """Path of the first record carrying deliveryId (the whole document is searched)."""
    stack: list[tuple[Any, str]] = [(node, path)]
    while stack:
        item, where = stack.pop()
        if isinstance(item, dict):
            if "deliveryId" in item:
                return where
            for key in ("queues", "tasks"):
                child = item.get(key)
                if isinstance(child, list):
                    stack.extend((c, f"{where}.{key}[{i}]") for i, c in enumerate(child))
        elif isinstance(item, list):
            stack.extend((c, f"{where}[{i}]") for i, c in enumerate(item))
    return None


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _require(cond: bool, record: str, message: str) -> None:
    if not cond:
        raise SnapshotError(message, record)


def _nonneg(value: Any, record: str, limit: int = BIGINT_MAX) -> None:
    _require(
        _is_int(value) and 0 <= value <= limit,
        record,
        f"must be an integer in [0, {limit}], got {value!r}",
    )


def _storable(doc: Doc) -> None:
    """What PostgreSQL can hold, anywhere in the document (a snapshot must import into
    either store): the stores' own rule, `queueguard.core.jsonb`."""
    problem = jsonb.first_problem(doc)
    if problem is not None:
        where, why = problem
        raise SnapshotError(why, where)


def _timestamp(value: Any) -> bool:
    """An ISO 8601 instant with an explicit offset, e.g. 2026-01-01T00:00:00.000000Z."""
    if not isinstance(value, str) or not _TIMESTAMP.fullmatch(value):
        return False
    try:
        datetime.fromisoformat(value)
    except ValueError:
        return False
    return True


def _validate(doc: Doc, version: int) -> None:
    _storable(doc)
    queues: Any = doc.get("queues")
    _require(isinstance(queues, list), "queues", "must be a list")
    seen: set[str] = set()
    for i, q in enumerate(queues):
        rec = f"queues[{i}]"
        _require(isinstance(q, dict), rec, "must be an object")
        key = q.get("physicalQueue")
        _require(isinstance(key, str), f"{rec}.physicalQueue", "must be a string")
        try:
            decoded = decode(key, allow_auto=True)
        except InvalidQueueKey as exc:
            raise SnapshotError(str(exc), f"{rec}.physicalQueue") from None
        # After 004 a legacy auto queue survives only as a drained row kept for inspection.
        legacy_auto = not isinstance(decoded, PhysicalQueue)
        _require(key not in seen, f"{rec}.physicalQueue", f"duplicate queue {key!r}")
        seen.add(key)
        for field in ("rangeId", "ackLevel", "lastTaskId"):
            _nonneg(q.get(field), f"{rec}.{field}")
        _require(
            q["ackLevel"] <= q["lastTaskId"],
            rec,
            f"ackLevel {q['ackLevel']} > lastTaskId {q['lastTaskId']}",
        )
        tasks = q.get("tasks")
        _require(isinstance(tasks, list), f"{rec}.tasks", "must be a list")
        _require(
            not (legacy_auto and tasks and version == CURRENT_FORMAT),
            rec,
            "a legacy auto queue holds tasks in a format-4 document",
        )
        ids: set[int] = set()
        for j, t in enumerate(tasks):
            trec = f"{rec}.tasks[{j}]"
            _require(isinstance(t, dict), trec, "must be an object")
            tid = t.get("taskId")
            _require(
                _is_int(tid) and 0 < tid <= BIGINT_MAX,
                f"{trec}.taskId",
                f"must be an integer in [1, {BIGINT_MAX}], got {tid!r}",
            )
            _require(tid not in ids, f"{trec}.taskId", f"duplicate task id {tid}")
            ids.add(tid)
            _require(isinstance(t.get("data"), dict), f"{trec}.data", "must be a JSON object")
            if version == CURRENT_FORMAT:
                _require(
                    tid <= q["lastTaskId"],
                    f"{trec}.taskId",
                    f"task id {tid} above lastTaskId {q['lastTaskId']}",
                )
    _validate_user_data(doc.get("userData"))
    _validate_history(doc.get("history"))
    protocol: Any = doc.get("protocol")
    _require(isinstance(protocol, dict), "protocol", "must be an object with min and max")
    _nonneg(protocol.get("min"), "protocol.min", INT_MAX)
    _nonneg(protocol.get("max"), "protocol.max", INT_MAX)
    _require(protocol["min"] <= protocol["max"], "protocol", "min > max")


def _validate_user_data(entries: Any) -> None:
    _require(isinstance(entries, list), "userData", "must be a list")
    seen: set[tuple[str, str]] = set()
    for i, u in enumerate(entries):
        rec = f"userData[{i}]"
        _require(isinstance(u, dict), rec, "must be an object")
        for field in ("namespace", "taskQueue"):
            _require(
                isinstance(u.get(field), str) and u[field] != "",
                f"{rec}.{field}",
                "must be a non-empty string",
            )
        _require(
            _is_int(u.get("version")) and 1 <= u["version"] <= BIGINT_MAX,
            f"{rec}.version",
            f"must be an integer in [1, {BIGINT_MAX}]",
        )
        _require("data" in u, f"{rec}.data", "missing")
        key = (u["namespace"], u["taskQueue"])
        _require(key not in seen, rec, f"duplicate user data for {key}")
        seen.add(key)


def _validate_history(history: Any) -> None:
    _require(isinstance(history, dict), "history", "must be an object")
    executions = history.get("executions")
    scheduled = history.get("scheduledTasks")
    _require(isinstance(executions, list), "history.executions", "must be a list")
    _require(isinstance(scheduled, list), "history.scheduledTasks", "must be a list")
    runs: set[str] = set()
    for i, e in enumerate(executions):
        rec = f"history.executions[{i}]"
        _require(isinstance(e, dict), rec, "must be an object")
        run_id = e.get("runId")
        _require(
            isinstance(run_id, str) and _canonical_uuid(run_id),
            f"{rec}.runId",
            f"must be a lowercase uuid, got {run_id!r}",
        )
        _require(run_id not in runs, f"{rec}.runId", f"duplicate run {run_id}")
        runs.add(run_id)
        _require(e.get("status") in STATUSES, f"{rec}.status", f"must be one of {STATUSES}")
        _require(
            e.get("versioningBehavior") in BEHAVIORS,
            f"{rec}.versioningBehavior",
            f"must be one of {BEHAVIORS}",
        )
        for field in ("namespace", "workflowId"):
            _require(isinstance(e.get(field), str), f"{rec}.{field}", "must be a string")
        dv = e.get("deploymentVersion")
        _require(
            dv is None or isinstance(dv, str),
            f"{rec}.deploymentVersion",
            "must be a string or null",
        )
    seen: set[tuple[str, int]] = set()
    for i, s in enumerate(scheduled):
        rec = f"history.scheduledTasks[{i}]"
        _require(isinstance(s, dict), rec, "must be an object")
        run_id = s.get("runId")
        _require(
            isinstance(run_id, str) and run_id in runs, f"{rec}.runId", "refers to no execution"
        )
        _require(
            _is_int(s.get("scheduledEventId"))
            and BIGINT_MIN <= s["scheduledEventId"] <= BIGINT_MAX,
            f"{rec}.scheduledEventId",
            "must be a 64-bit integer",
        )
        _require(s.get("kind") in ("workflow", "activity"), f"{rec}.kind", "workflow or activity")
        started = s.get("startedAt")
        _require(
            started is None or _timestamp(started),
            f"{rec}.startedAt",
            f"must be null or a timestamp like 2026-01-01T00:00:00.000000Z, got {started!r}",
        )
        key = (s["runId"], s["scheduledEventId"])
        _require(key not in seen, rec, f"duplicate scheduled task {key}")
        seen.add(key)


def _canonical_uuid(text: str) -> bool:
    try:
        return str(uuid.UUID(text)) == text
    except ValueError:
        return False


# memory store <-> document -------------------------------------------------------------
def export_memory(db: MemoryDatabase) -> Doc:
    """The whole memory store as a format-4 document (sorted, so exports are comparable)."""
    with db.lock:
        return {
            "formatVersion": CURRENT_FORMAT,
            "queues": [
                {
                    "physicalQueue": key,
                    "rangeId": r.range_id,
                    "ackLevel": r.ack_level,
                    "lastTaskId": r.last_task_id,
                    "tasks": [{"taskId": t, "data": r.tasks[t]} for t in sorted(r.tasks)],
                }
                for key, r in sorted(db.queues.items())
            ],
            "userData": [
                {"namespace": ns, "taskQueue": tq, "version": v, "data": d}
                for (ns, tq), (v, d) in sorted(db.user_data.items())
            ],
            "history": {
                "executions": [e.as_record() for _, e in sorted(db.executions.items())],
                "scheduledTasks": [
                    {
                        "runId": run,
                        "scheduledEventId": ev,
                        "kind": s.kind,
                        "startedAt": s.started_at,
                    }
                    for (run, ev), s in sorted(db.scheduled.items())
                ],
            },
            "protocol": {"min": db.protocol[0], "max": db.protocol[1]},
        }


def import_memory(doc: Doc) -> MemoryDatabase:
    """A new MemoryDatabase holding a validated format-4 document."""
    db = MemoryDatabase(protocol=(doc["protocol"]["min"], doc["protocol"]["max"]))
    for q in doc["queues"]:
        db.queues[q["physicalQueue"]] = QueueRecord(
            q["rangeId"],
            q["ackLevel"],
            q["lastTaskId"],
            {t["taskId"]: t["data"] for t in q["tasks"]},
        )
    for u in doc["userData"]:
        db.user_data[(u["namespace"], u["taskQueue"])] = (u["version"], u["data"])
    for e in doc["history"]["executions"]:
        db.executions[e["runId"]] = Execution.from_record(e)
    for s in doc["history"]["scheduledTasks"]:
        db.scheduled[(s["runId"], s["scheduledEventId"])] = ScheduledTask(
            s["kind"], s.get("startedAt")
        )
    return db


def normalise(doc: Doc) -> Doc:
    """Canonical ordering, so two documents of the same state compare equal."""
    out = dict(doc)
    out["queues"] = sorted(
        ({**q, "tasks": sorted(q["tasks"], key=lambda t: t["taskId"])} for q in doc["queues"]),
        key=lambda q: q["physicalQueue"],
    )
    out["userData"] = sorted(doc["userData"], key=lambda u: (u["namespace"], u["taskQueue"]))
    out["history"] = {
        "executions": sorted(doc["history"]["executions"], key=lambda e: e["runId"]),
        "scheduledTasks": sorted(
            doc["history"]["scheduledTasks"], key=lambda s: (s["runId"], s["scheduledEventId"])
        ),
    }
    return out
