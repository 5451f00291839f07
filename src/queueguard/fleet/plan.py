"""`fleet plan`: the downtime bill of a fleet, read only on every target.

Per target: where it is, the sizes of its tables (catalog reads only), and from them its
bill — estimated time, longest blocking lock, the statements over `--max-lock`. Statements
are traced on a scratch sample of one *representative* target only: targets at the same
revision with the same catalog form a group, and the group's largest target is traced
(`plan`'s trace); every target of the group is priced from that trace at its own sizes, as
`plan` scales a sample to its target. Then the fleet: the targets per wave, the slowest,
and the predicted time of the whole run under the waves' caps, the longest targets first.

Schema targets are listed, not priced yet (their sizes and trace are per schema)."""

from __future__ import annotations

import heapq
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import psycopg

from queueguard.errors import QueueguardError
from queueguard.fleet import apply, verify
from queueguard.fleet.resolved import Fleet
from queueguard.fleet.targets import Target, Wave
from queueguard.pg.connect import reason
from queueguard.sets import MigrationSet
from queueguard.upgrade.plan import bill, planner, sample


@dataclass
class Read:
    target: Target
    revision: str | None = None
    sizes: Mapping[str, bill.Size] = field(default_factory=dict)
    fingerprint: str = ""
    error: str | None = None


def read(mset: MigrationSet, t: Target) -> Read:
    """Where a target is, its sizes and its catalog's fingerprint (read only)."""
    if t.schema is not None:
        return Read(t, error="schema targets are not priced yet: listed only")
    skip = sorted(set(verify.LEDGERS) | set(mset.bookkeeping))
    try:
        at = apply.current(mset, t)
        with sample.read_only(t.dsn) as conn:
            sizes = sample.sizes(conn)
        objects = verify.catalog_of(t.dsn, None, skip)
    except (QueueguardError, psycopg.Error) as exc:
        text = reason(exc) if isinstance(exc, psycopg.Error) else str(exc)
        return Read(t, error=text.splitlines()[0])
    return Read(t, at, sizes, verify.fingerprint(objects))


def size_of(sizes: Mapping[str, bill.Size]) -> int:
    return sum(s.heap_bytes + s.index_bytes + s.toast_bytes for s in sizes.values())


def plan(
    fleet: Fleet,
    to: str | None,
    max_lock_ms: float | None,
    scratch_admin: str | None = None,
    sample_rows: int = sample.DEFAULT_ROWS,
) -> dict[str, Any]:
    mset = fleet.mset
    target = mset.resolve(to)
    with ThreadPoolExecutor(8) as pool:
        reads = list(pool.map(lambda t: read(mset, t), fleet.targets))
    groups: dict[tuple[str | None, str], list[Read]] = {}
    for r in reads:
        if r.error is None and mset.pending(r.revision, to):
            groups.setdefault((r.revision, r.fingerprint), []).append(r)
    entries: dict[str, dict[str, Any]] = {}
    for r in reads:
        entries[r.target.name] = {"name": r.target.name, "revision": r.revision,
                                  "target": target, "error": r.error}  # fmt: skip
        if r.error is None and not mset.pending(r.revision, to):
            entries[r.target.name] |= {"estimateMs": 0.0, "longestLockMs": 0.0, "over": [],
                                       "pending": []}  # fmt: skip
    for (revision, _), members in groups.items():
        largest = max(members, key=lambda r: size_of(r.sizes))
        pending = mset.pending(revision, to)
        try:
            traced, _ = planner.trace_target(
                mset, largest.target.dsn, pending, scratch_admin=scratch_admin,
                sample_rows=sample_rows,
            )  # fmt: skip
        except (QueueguardError, psycopg.Error) as exc:
            text = reason(exc) if isinstance(exc, psycopg.Error) else str(exc)
            for r in members:
                entries[r.target.name]["error"] = (
                    f"the trace on {largest.target.name} failed: {text.splitlines()[0]}"
                )
            continue
        for r in members:
            bill_lines = planner.bill_traced(traced, r.sizes, max_lock_ms)
            entries[r.target.name] |= _priced(bill_lines, r, largest.target.name)
    doc_targets = [entries[t.name] for t in fleet.targets]
    waves = _waves(fleet.file.waves, fleet.members, entries)
    slowest = sorted(
        (e for e in doc_targets if e.get("estimateMs")), key=lambda e: -e["estimateMs"]
    )[:10]
    ok = all(e["error"] is None and not e.get("over") for e in doc_targets)
    return {
        "format": mset.format,
        "target": target,
        "maxLockMs": max_lock_ms,
        "ok": ok,
        "targets": doc_targets,
        "waves": waves,
        "predictedMs": round(sum(w["predictedMs"] for w in waves), 1),
        "slowest": [{"name": e["name"], "estimateMs": e["estimateMs"]} for e in slowest],
        "refusedWithoutOnline": [e["name"] for e in doc_targets if e.get("over")],
    }


def _priced(
    revisions: list[tuple[str, list[bill.Line]]], read: Read, representative: str
) -> dict[str, Any]:
    lines = [line for _, ls in revisions for line in ls]
    longest = max((line.held_ms for line in lines if line.blocking), default=0.0)
    touched = sorted({rel for line in lines for rel, _ in line.seen.locks} & set(read.sizes))
    return {
        "pending": [rid for rid, _ in revisions],
        "representative": representative,
        "estimateMs": round(sum(line.estimate_ms for line in lines), 1),
        "longestLockMs": round(longest, 1),
        "over": [
            {"revision": line.revision, "index": line.index, "sql": line.seen.sql[:200],
             "heldMs": round(line.held_ms, 1)}
            for line in lines if line.verdict == "exceeds-max-lock"
        ],
        "tables": {
            name: {"rows": read.sizes[name].rows, "bytes": read.sizes[name].heap_bytes}
            for name in touched
        },
    }  # fmt: skip


def makespan(durations: Sequence[float], slots: int) -> float:
    """The time `durations` take on `slots` workers, the longest started first (LPT)."""
    if not durations:
        return 0.0
    ends = [0.0] * max(1, min(slots, len(durations)))
    for d in sorted(durations, reverse=True):
        heapq.heapreplace(ends, ends[0] + d)
    return max(ends)


def _waves(
    waves: Sequence[Wave], members: Sequence[Sequence[Target]], entries: Mapping[str, Any]
) -> list[dict[str, Any]]:
    found = []
    for wave, targets in zip(waves, members, strict=True):
        times = [float(entries[t.name].get("estimateMs") or 0.0) for t in targets]
        found.append({
            "name": wave.name, "targets": [t.name for t in targets], "parallel": wave.parallel,
            "predictedMs": round(makespan(times, wave.parallel), 1),
        })  # fmt: skip
    return found


def text(doc: dict[str, Any]) -> str:
    lines = [f"fleet plan: {len(doc['targets'])} targets to {doc['target']}, predicted "
             f"{doc['predictedMs'] / 1000:.1f} s under the waves' caps"]  # fmt: skip
    for w in doc["waves"]:
        lines.append(f"  wave {w['name']}: {len(w['targets'])} target(s), parallel "
                     f"{w['parallel']}, {w['predictedMs'] / 1000:.1f} s")  # fmt: skip
    for t in doc["targets"]:
        if t["error"]:
            lines.append(f"    {t['name']}: at {t['revision'] or 'nothing'}: {t['error']}")
            continue
        took, lock = t["estimateMs"] / 1000, t["longestLockMs"]
        line = (f"    {t['name']}: {t['revision'] or 'empty'} -> {t['target']}, "
                f"{took:.2f} s, longest lock {lock:.0f} ms")  # fmt: skip
        if t.get("over"):
            line += f", {len(t['over'])} statement(s) over --max-lock"
        lines.append(line)
    if doc["refusedWithoutOnline"]:
        lines.append("  over --max-lock (fleet upgrade would refuse them): "
                     + ", ".join(doc["refusedWithoutOnline"]))  # fmt: skip
    return "\n".join(lines)


def markdown(doc: dict[str, Any]) -> str:
    lines = [f"### queueguard fleet plan: {len(doc['targets'])} targets, predicted "
             f"{doc['predictedMs'] / 1000:.1f} s", "",
             "| target | revision | estimate | longest lock | over the budget |",
             "|---|---|---:|---:|---|"]  # fmt: skip
    for t in doc["targets"]:
        if t["error"]:
            lines.append(f"| {t['name']} | {t['revision'] or ''} | | | {t['error']} |")
            continue
        over = "<br>".join(f"`{o['sql'][:80]}` {o['heldMs']:.0f} ms" for o in t.get("over", []))
        took, lock = t["estimateMs"] / 1000, t["longestLockMs"]
        lines.append(f"| {t['name']} | {t['revision'] or 'empty'} → {t['target']} | "
                     f"{took:.2f} s | {lock:.0f} ms | {over} |")  # fmt: skip
    return "\n".join(lines) + "\n"
