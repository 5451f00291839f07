"""`fleet plan`: the downtime bill of a fleet, read only on every target.

Per target: where it is, the sizes of its tables (catalog reads only), and from them its
bill — estimated time, longest blocking lock, the statements over `--max-lock`. Statements
are traced on a scratch sample of one *representative* target only: targets at the same
revision with the same catalog form a group, and the group's largest target is traced
(`plan`'s trace); every target of the group is priced from that trace at its own sizes, as
`plan` scales a sample to its target. Then the fleet: the targets per wave, the slowest,
and the predicted time of the whole run under the waves' caps, the longest targets first.

A schema target is read and traced as its sessions run (`search_path` its schema alone):
its own tables and the shared ones it can reach are sized and sampled, its neighbours
(the fleet's other schema targets in its database) are not."""

from __future__ import annotations

import heapq
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Any

import psycopg

from queueguard.engine.plan import bill, planner, sample, watch
from queueguard.errors import QueueguardError, UsageError
from queueguard.fleet import apply, timing, verify
from queueguard.fleet.resolved import Fleet
from queueguard.fleet.state import said, said_target, shown, shown_target
from queueguard.fleet.targets import Target, Wave
from queueguard.fleet.verify import Q
from queueguard.pg import scratch
from queueguard.pg.connect import connection, reason
from queueguard.pg.dsn import with_search_path
from queueguard.sets import MigrationSet, Revision

#: the most copies of a sample upgraded at once to measure a wave's slowdown
MAX_AT_ONCE = 8


@dataclass
class Read:
    target: Target
    revision: str | None = None
    sizes: Mapping[str, bill.Size] = field(default_factory=dict)
    fingerprint: str = ""
    error: str | None = None


def neighbours(targets: Sequence[Target]) -> dict[str, list[str]]:
    """{schema target: the other schema targets' schemas in its database} — what its sample
    and sizes leave out."""
    schemas: dict[str, list[str]] = {}
    for t in targets:
        if t.schema is not None:
            schemas.setdefault(t.dsn, []).append(t.schema)
    return {
        t.name: [s for s in schemas[t.dsn] if s != t.schema]
        for t in targets
        if t.schema is not None
    }


def read(mset: MigrationSet, t: Target, leave_out: Sequence[str] = ()) -> Read:
    """Where a target is, its sizes and its catalog's fingerprint (read only); a schema
    target as its sessions see it, `leave_out`'s schemas not read."""
    skip = sorted(set(verify.LEDGERS) | set(mset.bookkeeping))
    try:
        at = apply.current(mset, t)
        with sample.read_only(apply.session_dsn(t)) as conn:
            sizes = sample.sizes(conn, leave_out)
        objects = verify.catalog_of(apply.session_dsn(t), t.schema, skip)
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
    goal = said_target(mset, target, "target", "targetHeads")
    near = neighbours(fleet.targets)
    with ThreadPoolExecutor(8) as pool:
        reads = list(pool.map(lambda t: read(mset, t, near.get(t.name, ())), fleet.targets))
    for r in reads:  # a target its set cannot go on from (a Django database past --to)
        if r.error is None:
            try:
                mset.pending(r.revision, to)
            except UsageError as exc:
                r.error = str(exc).splitlines()[0]
    groups: dict[tuple[str | None, str], list[Read]] = {}
    for r in reads:
        if r.error is None and mset.pending(r.revision, to):
            groups.setdefault((r.revision, r.fingerprint), []).append(r)
    entries: dict[str, dict[str, Any]] = {}
    for r in reads:
        entries[r.target.name] = {"name": r.target.name, **said(mset, r.revision),
                                  **goal, "error": r.error}  # fmt: skip
        if r.error is None and not mset.pending(r.revision, to):
            entries[r.target.name] |= {"estimateMs": 0.0, "longestLockMs": 0.0, "over": [],
                                       "pending": []}  # fmt: skip
    alone = apply.database_alone(mset)
    paired = list(zip(fleet.file.waves, fleet.members, strict=True))
    # how many targets of its wave run beside a target: the wave's cap, or all its chains
    at_once = {t.name: min(w.parallel, len(chains(ts, alone))) for w, ts in paired for t in ts}
    copies = min(MAX_AT_ONCE, max(at_once.values(), default=1))
    for (revision, _), members in groups.items():
        largest = max(members, key=lambda r: size_of(r.sizes))
        try:
            traced, fixed, timed = _trace(
                mset, largest.target, mset.pending(revision, to), to, copies,
                near.get(largest.target.name, ()), scratch_admin, sample_rows,
            )  # fmt: skip
        except (QueueguardError, psycopg.Error, RuntimeError) as exc:
            text = reason(exc) if isinstance(exc, psycopg.Error) else str(exc)
            for r in members:
                entries[r.target.name]["error"] = (
                    f"the trace on {largest.target.name} failed: {text.splitlines()[0]}"
                )
            continue
        for r in members:
            bill_lines = planner.bill_traced(traced, r.sizes, max_lock_ms, largest.sizes, fixed)
            entries[r.target.name] |= _priced(
                bill_lines, r, largest.target.name, timed, at_once[r.target.name]
            )
    doc_targets = [entries[t.name] for t in fleet.targets]
    waves = _waves(paired, entries, alone)
    slowest = sorted(
        (e for e in doc_targets if e.get("estimateMs")), key=lambda e: -e["estimateMs"]
    )[:10]
    ok = all(e["error"] is None and not e.get("over") for e in doc_targets)
    return {
        "format": mset.format,
        **goal,
        "maxLockMs": max_lock_ms,
        "ok": ok,
        "targets": doc_targets,
        "waves": waves,
        "predictedMs": round(sum(w["predictedMs"] for w in waves), 1),
        "slowest": [{"name": e["name"], "estimateMs": e["estimateMs"]} for e in slowest],
        "refusedWithoutOnline": [e["name"] for e in doc_targets if e.get("over")],
    }


def _trace(
    mset: MigrationSet,
    representative: Target,
    pending: list[Revision],
    to: str | None,
    at_once: int,
    leave_out: Sequence[str],
    scratch_admin: str | None,
    sample_rows: int,
) -> tuple[list[watch.Traced], list[watch.Traced], timing.Timing]:
    """A group's pending revisions traced on its representative's sample and on an empty
    copy of it (each statement's fixed time), and its timing measured on copies of the
    sample (`timing`): `at_once` of them upgraded together."""
    workers = mset.format in apply.ONE_AT_A_TIME
    with planner.sampled(
        representative.dsn, scratch_admin=scratch_admin, sample_rows=sample_rows,
        schema=representative.schema, leave_out=leave_out,
    ) as (databases, copy, _):  # fmt: skip
        template = scratch.dbname_of(copy)
        empty = databases.create(template)
        if representative.schema is not None:
            empty = with_search_path(empty, representative.schema)
        _emptied(empty, mset)
        count = (at_once if workers else 1) + 1 + (at_once if at_once > 1 else 0)
        clones = [
            replace(representative, name=f"{representative.name} (timed copy {i})",
                    dsn=databases.create(template))
            for i in range(count)
        ]  # fmt: skip
        seen = planner.traced(mset, pending, copy)
        try:  # a revision that needs rows (a data migration) may fail on no rows at all:
            fixed = planner.traced(mset, pending, empty)  # then no part is fixed
        except (QueueguardError, psycopg.Error):
            fixed = []
        statements_ms = sum(o.seconds for t in seen for o in t.seen) * 1000
        warm = clones[: count - 1 - (at_once if at_once > 1 else 0)]
        alone, together = clones[len(warm)], clones[len(warm) + 1 :]
        from queueguard.fleet.alembic_worker import Worker

        def worker() -> Worker | None:
            return Worker(mset.root, mset.format) if workers else None

        return seen, fixed, timing.measure(mset, warm, alone, together, to, statements_ms, worker)


def _emptied(dsn: str, mset: MigrationSet) -> None:
    """Every table of the copy at `dsn` emptied but the ledgers: what a statement takes
    there is the part of its time no size scales."""
    keep = sorted(set(verify.LEDGERS) | set(mset.bookkeeping))
    with connection(dsn) as conn:
        tables = [r[0] for r in conn.execute(Q["user_tables"], {"keep": keep}).fetchall()]
        if tables:
            conn.execute(f"TRUNCATE {', '.join(tables)} CASCADE")  # names quoted by the query
        conn.commit()


def _priced(
    revisions: list[tuple[str, list[bill.Line]]],
    read: Read,
    representative: str,
    timed: timing.Timing,
    at_once: int,
) -> dict[str, Any]:
    lines = [line for _, ls in revisions for line in ls]
    longest = max((line.held_ms for line in lines if line.blocking), default=0.0)
    touched = sorted({rel for line in lines for rel, _ in line.seen.locks} & set(read.sizes))
    alone = timed.overhead_ms + sum(line.estimate_ms for line in lines)
    return {
        "pending": [rid for rid, _ in revisions],
        "representative": representative,
        # in the run: alone, stretched by the targets of its wave running beside it
        "estimateMs": round(alone * timed.stretch(at_once), 1),
        "aloneMs": round(alone, 1),
        "overheadMs": round(timed.overhead_ms, 1),
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


def chains(targets: Sequence[Target], alone: bool) -> list[list[Target]]:
    """The targets as a run can run them side by side: each on its own, but the schema
    targets of one database one after the other when the set makes them take turns
    (`apply.database_alone`)."""
    found: dict[str, list[Target]] = {}
    for t in targets:
        key = f"database {t.dsn}" if alone and t.schema is not None else f"target {t.name}"
        found.setdefault(key, []).append(t)
    return list(found.values())


def _waves(
    paired: Sequence[tuple[Wave, Sequence[Target]]], entries: Mapping[str, Any], alone: bool
) -> list[dict[str, Any]]:
    found = []
    for wave, targets in paired:
        times = [
            sum(float(entries[t.name].get("estimateMs") or 0.0) for t in chain)
            for chain in chains(targets, alone)
        ]
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
            lines.append(f"    {t['name']}: at {shown(t) or 'nothing'}: {t['error']}")
            continue
        took, lock = t["estimateMs"] / 1000, t["longestLockMs"]
        goal = shown_target(t, "target", "targetHeads")
        line = (f"    {t['name']}: {shown(t) or 'empty'} -> {goal}, "
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
            lines.append(f"| {t['name']} | {shown(t) or ''} | | | {t['error']} |")
            continue
        over = "<br>".join(f"`{o['sql'][:80]}` {o['heldMs']:.0f} ms" for o in t.get("over", []))
        took, lock = t["estimateMs"] / 1000, t["longestLockMs"]
        goal = shown_target(t, "target", "targetHeads")
        lines.append(f"| {t['name']} | {shown(t) or 'empty'} → {goal} | "
                     f"{took:.2f} s | {lock:.0f} ms | {over} |")  # fmt: skip
    return "\n".join(lines) + "\n"
