"""The board of a run (pure): per wave the targets in each state, each target's revision,
state, time and error, the predicted time left; a target running longer than predicted is
marked. One JSON document (`--output json`), rendered as text or Markdown from it."""

from __future__ import annotations

from collections import Counter
from typing import Any

from queueguard.fleet.control import STATES
from queueguard.fleet.state import said, shown
from queueguard.sets import MigrationSet


def document(
    run: int,
    rows: list[tuple[Any, ...]],
    not_in_run: list[str] | None = None,
    mset: MigrationSet | None = None,
) -> dict[str, Any]:
    """`mset`: the run's set, for a Django target's state said app by app (`state.said`)."""
    targets = []
    waves: dict[str, Counter[str]] = {}
    left_ms = 0
    for r in rows:
        (name, _wave, wave_name, state, revision, error, attempts, elapsed_ms, predicted_ms,
         fence, dsn, schema, running_ms, expired, lock_waits) = r[:15]  # fmt: skip
        took = elapsed_ms if state != "running" else running_ms
        late = bool(
            state == "running" and predicted_ms and running_ms and running_ms > predicted_ms
        )
        if state in ("pending", "running") and predicted_ms:
            left_ms += max(0, predicted_ms - (running_ms or 0))
        targets.append({
            "name": name, "wave": wave_name, "state": state, **said(mset, revision),
            "error": error, "attempts": attempts, "ms": took, "predictedMs": predicted_ms,
            "fence": fence, "dsn": dsn, "schema": schema, "lockWaits": lock_waits,
            "late": late, "leaseExpired": bool(expired),
        })  # fmt: skip
        waves.setdefault(wave_name or "(not in this run)", Counter())[state] += 1
    return {
        "run": run,
        "waves": [
            {"name": w, "states": {s: c[s] for s in STATES if c[s]}} for w, c in waves.items()
        ],
        "targets": targets,
        "notInRun": sorted(not_in_run or []),
        "predictedLeftMs": left_ms,
        "done": bool(targets)
        and all(t["state"] == "done" for t in targets if t["state"] != "not in this run"),
    }


def text(doc: dict[str, Any]) -> str:
    lines = [f"fleet run {doc['run']}"]
    for wave in doc["waves"]:
        counts = ", ".join(f"{n} {s}" for s, n in wave["states"].items())
        lines.append(f"  wave {wave['name']}: {counts}")
    for t in doc["targets"]:
        line = f"    {t['name']}: {t['state']}"
        if shown(t):
            line += f" at {shown(t)}"
        if t["ms"] is not None:
            line += f" ({t['ms'] / 1000:.1f} s)"
        if t["late"]:
            line += " LATE (longer than predicted)"
        if t["error"]:
            line += f": {t['error']}"
        lines.append(line)
    if doc["predictedLeftMs"]:
        lines.append(f"  predicted time left: {doc['predictedLeftMs'] / 1000:.1f} s")
    return "\n".join(lines)


def markdown(doc: dict[str, Any]) -> str:
    lines = [f"### queueguard fleet run {doc['run']}", "", "| wave | " + " | ".join(STATES) + " |",
             "|---|" + "---:|" * len(STATES)]  # fmt: skip
    for wave in doc["waves"]:
        cells = " | ".join(str(wave["states"].get(s, 0)) for s in STATES)
        lines.append(f"| {wave['name']} | {cells} |")
    lines += [
        "",
        "| target | wave | state | revision | time | error |",
        "|---|---|---|---|---:|---|",
    ]
    for t in doc["targets"]:
        took = "" if t["ms"] is None else f"{t['ms'] / 1000:.1f} s"
        error = (t["error"] or "").replace("|", "\\|")
        lines.append(
            f"| {t['name']} | {t['wave'] or ''} | {t['state']}{' (late)' if t['late'] else ''} "
            f"| {shown(t) or ''} | {took} | {error} |"
        )
    return "\n".join(lines) + "\n"
