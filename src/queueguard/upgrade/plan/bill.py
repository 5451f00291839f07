"""The downtime bill (pure): from what each statement did on the sample to what it will cost
on the target — how long it runs, how long its locks stay held, and whether that is too long.

Scaling. A statement that only changes the catalog costs what it cost on the sample. One that
rewrote or scanned a table does work proportional to that table: its time on the sample is
scaled by the ratio of the table's size on the target to its size in the sample (heap plus
indexes: a rewrite rebuilds every index), and an index build, which sorts, by n·log n.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from queueguard.upgrade.plan.observe import Observation

#: pg_locks' names of the modes that make readers (SELECT) wait
BLOCKS_READS = frozenset({"AccessExclusiveLock"})
#: … and writers (INSERT/UPDATE/DELETE take ROW EXCLUSIVE)
BLOCKS_WRITES = frozenset(
    {"ShareLock", "ShareRowExclusiveLock", "ExclusiveLock", "AccessExclusiveLock"}
)
PAGE = 8192


@dataclass(frozen=True)
class Size:
    """One table's size: rows (None: never analysed), heap and index bytes, index count."""

    rows: int | None
    heap_bytes: int
    index_bytes: int
    indexes: int

    @property
    def bytes(self) -> int:
        return max(PAGE, self.heap_bytes + self.index_bytes)


@dataclass(frozen=True)
class Blocker:
    """A session on the target holding a lock a statement would queue behind."""

    relation: str
    mode: str
    pid: int
    state: str | None
    age_ms: float
    query: str


@dataclass
class Line:
    """One statement on the bill."""

    revision: str
    index: int
    seen: Observation
    estimate_ms: float = 0.0
    held_ms: float = 0.0
    basis: str = ""
    verdict: str = "ok"
    blocking: list[tuple[str, str]] = field(default_factory=list)
    waits_behind: list[Blocker] = field(default_factory=list)
    safer: str | None = None


def _table_of(name: str, indexes: Mapping[str, str]) -> str:
    return indexes.get(name, name)


def estimate(
    seen: Observation,
    sample: Mapping[str, Size],
    target: Mapping[str, Size],
    indexes: Mapping[str, str],
) -> tuple[float, str]:
    """(estimate_ms, basis) of one statement on the target."""
    sample_ms = seen.seconds * 1000
    touched = sorted({_table_of(n, indexes) for n in [*seen.rewrites, *seen.scans]})
    touched = [t for t in touched if t in target and t in sample]
    if not touched:
        return sample_ms, "catalog only: as long as on the sample"
    ratios = {t: target[t].bytes / sample[t].bytes for t in touched}
    table = max(ratios, key=lambda t: ratios[t])
    ratio = max(1.0, ratios[table])
    factor = ratio
    how = "rewrites" if table in {_table_of(n, indexes) for n in seen.rewrites} else "scans"
    builds_index = any(_table_of(c, indexes) == table for c in seen.created) or (
        how == "rewrites" and target[table].indexes > 0
    )
    rows_s, rows_t = sample[table].rows or 0, target[table].rows or 0
    if builds_index and rows_s > 1 and rows_t > rows_s:
        factor *= math.log2(rows_t) / math.log2(rows_s)  # a sort: n log n
    basis = (
        f"{how} {table}: {sample_ms:.1f} ms on the sample ({rows_s} rows, "
        f"{sample[table].bytes // 1024} kB) × {factor:.1f} (target {rows_t} rows, "
        f"{target[table].bytes // 1024} kB{', n·log n for the sort' if builds_index else ''})"
    )
    return sample_ms * factor, basis


def blocking(seen: Observation) -> list[tuple[str, str]]:
    """The read- or write-blocking locks it takes on relations that existed before it."""
    return [(rel, mode) for rel, mode in seen.locks if mode in BLOCKS_WRITES]


def verdict(line: Line, max_lock_ms: float | None) -> str:
    if not line.blocking:
        return "ok"
    if max_lock_ms is not None and line.held_ms > max_lock_ms:
        return "exceeds-max-lock"
    if any(mode in BLOCKS_READS for _, mode in line.blocking):
        return "blocks-reads"
    return "blocks-writes"


def held(lines: Sequence[Line]) -> None:
    """Set each line's held_ms for one revision applied as `upgrade` applies it: a lock taken
    in a transaction stays until the commit — through every later statement of that
    transaction; a statement outside a transaction holds its locks while it runs."""
    run_end = len(lines)
    for i in range(len(lines) - 1, -1, -1):
        line = lines[i]
        if not line.seen.transactional:
            line.held_ms = line.estimate_ms
            run_end = i
            continue
        line.held_ms = sum(x.estimate_ms for x in lines[i:run_end])


_SAFER: list[tuple[re.Pattern[str], str]] = [
    (
        re.compile(r"^\s*CREATE\s+(UNIQUE\s+)?INDEX\s+(?!CONCURRENTLY)", re.I),
        "CREATE INDEX CONCURRENTLY, outside a transaction: it blocks no writer",
    ),
    (
        re.compile(
            r"\bADD\s+(CONSTRAINT\s+\S+\s+)?(FOREIGN\s+KEY|CHECK)\b(?!.*NOT\s+VALID)", re.I | re.S
        ),
        "ADD CONSTRAINT … NOT VALID, then VALIDATE CONSTRAINT in its own transaction "
        "(it scans under SHARE UPDATE EXCLUSIVE, which blocks no writer)",
    ),
    (
        re.compile(r"\bSET\s+NOT\s+NULL\b", re.I),
        "ADD CONSTRAINT … CHECK (col IS NOT NULL) NOT VALID, VALIDATE it, then SET NOT NULL: "
        "PostgreSQL 12+ skips the scan when a valid CHECK proves it",
    ),
    (
        re.compile(r"\bALTER\s+(COLUMN\s+)?\S+\s+(SET\s+DATA\s+)?TYPE\b", re.I),
        "add a new column, backfill it in batches, and switch readers to it",
    ),
    (
        re.compile(r"\bADD\s+(COLUMN\s+)?", re.I),
        "add the column nullable without a volatile default or a STORED expression, "
        "backfill it in batches, then set its default",
    ),
]


def safer(line: Line) -> str | None:
    """A safer form of the statement, where one is known (only for a costly lock)."""
    if not line.blocking or not (line.seen.rewrites or line.seen.scans):
        return None
    for pattern, advice in _SAFER:
        if pattern.search(line.seen.sql):
            return advice
    return None


def document(line: Line) -> dict[str, Any]:
    s = line.seen
    return {
        "index": line.index,
        "sql": s.sql,
        "transactional": s.transactional,
        "locks": [{"relation": r, "mode": m} for r, m in s.locks],
        "rewrites": s.rewrites,
        "scans": s.scans,
        "created": s.created,
        "estimate_ms": round(line.estimate_ms, 1),
        "held_ms": round(line.held_ms, 1),
        "basis": line.basis,
        "verdict": line.verdict,
        "safer": line.safer,
        "waits_behind": [
            {
                "relation": b.relation,
                "mode": b.mode,
                "pid": b.pid,
                "state": b.state,
                "age_ms": round(b.age_ms),
                "query": b.query,
            }
            for b in line.waits_behind
        ],
    }
