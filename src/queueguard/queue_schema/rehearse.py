"""`queueguard rehearse`: upgrade CI for the user's own data, on a copy.

The source database is never written: it is cloned with CREATE DATABASE … TEMPLATE where
that is allowed (no other session connected), else dumped with pg_dump and restored into a
scratch database. The copy is upgraded and checked against conservation laws, since there is
no golden state for real data.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from queueguard import revisions
from queueguard.core.keys import AUTO_VERSION
from queueguard.engine.rehearse import rehearsal
from queueguard.errors import RolloutInProgress
from queueguard.pg.connect import connection
from queueguard.queue_schema import state
from queueguard.queue_schema.guards import rollout
from queueguard.queue_schema.runner import upgrade
from queueguard.report.units import count, duration_ms
from queueguard.revisions import SetFacts
from queueguard.snapshot.relocation import UNVERSIONED, directives
from queueguard.stores import schema


@dataclass
class Rehearsal:
    source_revision: str | None
    method: str
    violations: list[str] = field(default_factory=list)
    queues: list[dict[str, Any]] = field(default_factory=list)
    elapsed_ms: int = 0

    @property
    def ok(self) -> bool:
        return not self.violations

    def as_json(self) -> dict[str, Any]:
        return {"schemaVersion": 1, "ok": self.ok, **self.__dict__}


def render_text(result: Rehearsal) -> str:
    """The rehearsal for a terminal: the copy, each queue after the upgrade, the verdict."""
    source = result.source_revision or "an empty database"
    lines = [
        f"rehearsed the upgrade of a {result.method} copy (source at {source}) in "
        f"{duration_ms(result.elapsed_ms)}"
    ]
    lines += [
        f"  {q['queue']}: range {q['range']}, ack level {q['ack']}, last task id {q['last']}, "
        f"{count(q['rows'], 'row')}"
        for q in result.queues
    ]
    lines += [f"VIOLATION: {v}" for v in result.violations]
    lines.append("conservation laws hold" if result.ok else "REHEARSAL FAILED")
    return "\n".join(lines)


def _payload_key(data: Any) -> str:
    """A payload without its directive, as canonical text (for multiset comparison)."""
    import copy

    doc = copy.deepcopy(data)
    if isinstance(doc, dict) and isinstance(doc.get("task"), dict):
        doc["task"].pop("versionDirective", None)
    return json.dumps(doc, sort_keys=True, ensure_ascii=False)


def of_own_set(
    source_dsn: str, scratch_admin: str | None = None, migrations: SetFacts | None = None
) -> Rehearsal:
    """Upgrade a copy of the database at `source_dsn` (on `scratch_admin`'s server, default the
    source's) and check the conservation laws (`engine.rehearse.rehearsal.rehearse`: the copy
    is always dropped)."""
    started = time.monotonic()
    migrations = migrations or revisions.packaged()
    with connection(source_dsn) as conn, conn.cursor() as cursor:
        in_progress = rollout(cursor)
        conn.rollback()
    if in_progress is not None:  # the offline upgrade it rehearses would refuse too
        raise RolloutInProgress(*in_progress, "rehearse")
    method, _, result, elapsed_ms = rehearsal.rehearse(
        source_dsn,
        lambda copy: upgrade(copy, progress=False, force=True, migrations=migrations),
        lambda copy: _conservation(copy, migrations),
        scratch_admin,
        started=started,
    )
    return replace(result, method=method, elapsed_ms=elapsed_ms)


def _conservation(copy: str, migrations: SetFacts) -> Callable[[str], Rehearsal]:
    """The conservation laws as the rehearsal's check: the copy read before the upgrade, and
    the function that judges it after."""
    with connection(copy) as conn:
        revision = schema.inspect(conn).revision
        payloads = Counter(_payload_key(r[0]) for r in conn.execute("SELECT data FROM tasks"))
        # The pure-Python model of the relocating revision (snapshot.relocation) predicts
        # the state a copy at its predecessor must reach.
        relocating = [r for r in migrations.revisions if r.relocation_step]
        modelled = relocating and revision == relocating[0].down_revision
        before = state.export_database(conn, 3) if modelled else None

    def judged(upgraded: str) -> Rehearsal:
        with connection(upgraded) as conn:
            after = state.export_database(conn)
        queues = [
            {
                "queue": q["physicalQueue"],
                "range": q["rangeId"],
                "ack": q["ackLevel"],
                "last": q["lastTaskId"],
                "rows": len(q["tasks"]),
            }
            for q in after["queues"]
        ]
        return Rehearsal(revision, "", check_conservation(payloads, before, after), queues)

    return judged


def check_conservation(
    payloads_before: Counter[str], before: dict[str, Any] | None, after: dict[str, Any]
) -> list[str]:
    """The laws an upgrade must keep; returns human-readable violations."""
    problems = []
    payloads_after = Counter(_payload_key(t["data"]) for q in after["queues"] for t in q["tasks"])
    lost = payloads_before - payloads_after
    extra = payloads_after - payloads_before
    if lost:
        problems.append(f"{sum(lost.values())} task payload(s) lost, e.g. {next(iter(lost))[:200]}")
    if extra:
        problems.append(
            f"{sum(extra.values())} payload(s) duplicated or invented, "
            f"e.g. {next(iter(extra))[:200]}"
        )
    by_run = directives(after)
    old_ranges = {q["physicalQueue"]: q["rangeId"] for q in (before or {}).get("queues", [])}
    for q in after["queues"]:
        key, ids = q["physicalQueue"], [t["taskId"] for t in q["tasks"]]
        if q["rangeId"] is None:
            problems.append(f"{key}: task rows without a task_queues row")
            continue
        if len(set(ids)) != len(ids):
            problems.append(f"{key}: duplicate task ids")
        if ids and max(ids) > q["lastTaskId"]:
            problems.append(f"{key}: task id {max(ids)} above last_task_id {q['lastTaskId']}")
        if not 0 <= q["ackLevel"] <= q["lastTaskId"]:
            problems.append(f"{key}: ack_level {q['ackLevel']} outside [0, last_task_id]")
        if key.endswith("@" + AUTO_VERSION) and ids:
            problems.append(f"{key}: legacy auto queue still holds {len(ids)} rows")
        expected_range = old_ranges.get(key, 0) + 1 if before is not None else None
        if expected_range is not None and q["rangeId"] != expected_range:
            problems.append(f"{key}: range {q['rangeId']}, expected {expected_range} (fence)")
        for t in q["tasks"]:
            task = t["data"].get("task") if isinstance(t["data"], dict) else None
            if not isinstance(task, dict):
                continue
            want = by_run.get(str(task.get("runId")), UNVERSIONED)
            if task.get("versionDirective") != want:
                problems.append(
                    f"{key} task {t['taskId']}: directive "
                    f"{json.dumps(task.get('versionDirective'), sort_keys=True)} "
                    f"!= History's {json.dumps(want, sort_keys=True)}"
                )
    if after["protocol"] != {"min": 4, "max": 4}:
        window = after["protocol"]
        found = f"[{window['min']}, {window['max']}]" if window else "not a single row"
        problems.append(f"the protocol window is {found}, expected [4, 4]")
    return problems
