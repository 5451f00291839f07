"""The downtime bill (pure): from what each statement did on the sample to what it will cost
on the target — how long it runs, how long its locks stay held, and whether that is too long.

Scaling. A statement that only changes the catalog costs what it cost on the sample. One that
rewrote, scanned or indexed a table does work proportional to that table, of a kind the
observation tells apart:

- a rewrite (the table got a new file) reads the old heap, writes a new one — TOAST included —
  and rebuilds every index: its sample time is scaled by the ratio of heap + TOAST + index
  bytes, and by n·log n when the table has indexes (each rebuild sorts). The indexes are
  counted at the size the rewrite builds them, the sample's bytes per row times the target's
  rows: a rebuilt index is as compact as the sample's, freshly built, and the target's old
  ones (grown by years of inserts, often twice as large per row) are never read;
- an index build (`CREATE INDEX`, a constraint's index, `REINDEX`) reads the heap and sorts:
  scaled by the heap's ratio and n·log n;
- a scan (a CHECK or NOT NULL validation, a foreign key's check) reads the heap: scaled by the
  heap's ratio alone — not the indexes', which a validation never reads and which are, on the
  sample, freshly built and smaller per row than the target's.

On top comes reading the target's pages: the sample was just loaded, so its pages sat in
shared buffers while it was timed; a large table's pages on the target do not (a sequential
scan of a table over a quarter of `shared_buffers` cycles through a small ring of buffers)
and come from the OS page cache at best (`READ_MS_PER_PAGE`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from queueguard.engine.plan.observe import Observation

#: pg_locks' names of the modes that make readers (SELECT) wait
BLOCKS_READS = frozenset({"AccessExclusiveLock"})
#: … and writers (INSERT/UPDATE/DELETE take ROW EXCLUSIVE)
BLOCKS_WRITES = frozenset(
    {"ShareLock", "ShareRowExclusiveLock", "ExclusiveLock", "AccessExclusiveLock"}
)
PAGE = 8192
#: the cost of one 8 kB page read from the OS page cache instead of shared buffers: 4 µs
#: (about 2 GB/s), from `bench/plan` — a scan of 1 M rows (16,666 pages) not in shared
#: buffers took 110–300 ms where the same rows' tenth, in them, took 6–12 ms (PostgreSQL 18,
#: `io_method=worker`). A target read from disk costs more: the estimate is then low.
READ_MS_PER_PAGE = 0.004


@dataclass(frozen=True)
class Size:
    """One table's size: rows (None: never analysed), heap and index bytes, index count, and
    TOAST bytes (its heap and index)."""

    rows: int | None
    heap_bytes: int
    index_bytes: int
    indexes: int
    toast_bytes: int = 0

    @property
    def bytes(self) -> int:
        """Everything a rewrite writes again: heap, TOAST and indexes (at least one page)."""
        return max(PAGE, self.heap_bytes + self.toast_bytes + self.index_bytes)

    @property
    def heap(self) -> int:
        """What a scan or an index build reads: the heap (at least one page)."""
        return max(PAGE, self.heap_bytes)


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
    #: its WAL and the new relation files it keeps beside the old until commit, at the
    #: target's size (`bytes_at_target`)
    wal_bytes: int | None = None
    extra_disk_bytes: int | None = None
    verdict: str = "ok"
    blocking: list[tuple[str, str]] = field(default_factory=list)
    waits_behind: list[Blocker] = field(default_factory=list)
    safer: str | None = None


def _table_of(name: str, indexes: Mapping[str, str]) -> str:
    return indexes.get(name, name)


def _work(table: str, seen: Observation, indexes: Mapping[str, str]) -> str | None:
    """What the statement did to `table`: rewrote it, built an index on it (a new one, or an
    existing one rebuilt while the table kept its file), scanned it — or nothing."""
    if table in seen.rewrites and table not in indexes:
        return "rewrites"
    if any(indexes.get(n) == table for n in [*seen.created, *seen.rewrites]):
        return "indexes"
    if table in seen.scans:
        return "scans"
    return None


def _factor(
    work: str, sample: Size, target: Size, reference: Size | None = None
) -> tuple[float, bool]:
    """(scale of the sample's time, whether n·log n applies) for one kind of work;
    `reference`: the size the sample was taken at, when `target` is smaller (`estimate`)."""
    wanted = _scaled(work, target, sample)
    if reference is not None and wanted < _scaled(work, reference, sample):
        factor, sorts = _factor(work, sample, reference)
        return factor * wanted / max(1, _scaled(work, reference, sample)), sorts
    if work == "rewrites":
        ratio, sorts = wanted / sample.bytes, target.indexes > 0
    else:
        ratio, sorts = target.heap / sample.heap, work == "indexes"
    ratio = max(1.0, ratio)
    rows_s, rows_t = sample.rows or 0, target.rows or 0
    if sorts and rows_s > 1 and rows_t > rows_s:
        ratio *= math.log2(rows_t) / math.log2(rows_s)  # a sort: n log n
    return ratio, sorts


def _works(
    seen: Observation,
    sample: Mapping[str, Size],
    target: Mapping[str, Size],
    indexes: Mapping[str, str],
) -> dict[str, str]:
    """{table: the kind of work the statement did on it} for the tables it rewrote, scanned
    or built on that exist on the sample and on the target: what scales with their size."""
    named = {_table_of(n, indexes) for n in [*seen.rewrites, *seen.scans, *seen.created]}
    return {t: w for t in named if t in target and t in sample and (w := _work(t, seen, indexes))}


def estimate(
    seen: Observation,
    sample: Mapping[str, Size],
    target: Mapping[str, Size],
    indexes: Mapping[str, str],
    reference: Mapping[str, Size] | None = None,
    fixed_ms: float = 0.0,
) -> tuple[float, str]:
    """(estimate_ms, basis) of one statement on the target.

    `indexes` maps each index, existing before the statement or created by it, to its table.
    The sample's time is split over the tables the statement worked on, by the bytes read
    there, and each part scaled by its table's `_factor`; plus reading the target's pages that
    work reads (heap, and TOAST for a rewrite) from outside shared buffers. The basis names
    the table whose work scales most.

    `reference`: the sizes of the target the sample was taken from, when `target` is
    another (`fleet plan` prices a group from its largest target's sample): a table smaller
    there than on the reference is priced at the reference's size, then scaled down in
    proportion (a sample never scales below itself, since earlier statements may have grown
    it; a smaller target of the group does). `fixed_ms`: what the statement took on an empty
    copy of the sample, the part of its time no size scales (with a `reference` only)."""
    sample_ms = seen.seconds * 1000
    works = _works(seen, sample, target, indexes)
    if not works:
        return sample_ms, "catalog only: as long as on the sample"
    factors = {t: _factor(w, sample[t], target[t], (reference or {}).get(t))
               for t, w in works.items()}  # fmt: skip
    # the sample's time splits over the tables by the bytes their work read there (a FOREIGN
    # KEY's check reads the child and its parent: each part scales with its own table)
    weights = {t: _read(w, sample[t]) for t, w in works.items()}
    fixed = min(fixed_ms, sample_ms) if reference is not None else 0.0
    scaled = fixed + sum(
        (sample_ms - fixed) * weights[t] / sum(weights.values()) * factors[t][0] for t in works
    )
    read_ms = sum(_read(w, target[t]) for t, w in works.items()) / PAGE * READ_MS_PER_PAGE
    table = max(sorted(factors), key=lambda t: factors[t][0])
    how, (factor, sorts) = works[table], factors[table]
    size_s, size_t = sample[table], target[table]
    shown_s, shown = _scaled(how, size_s), _scaled(how, size_t, size_s)
    what = "heap, TOAST and indexes as rebuilt" if how == "rewrites" else "heap"
    others = f", {len(works) - 1} more table(s) by their own sizes" if len(works) > 1 else ""
    basis = (
        f"{how} {table}: {sample_ms:.1f} ms on the sample ({size_s.rows or 0} rows, "
        f"{what} {shown_s // 1024} kB) × {factor:.1f} (target {size_t.rows or 0} rows, "
        f"{shown // 1024} kB{', n·log n for the sort' if sorts else ''}{others}) "
        f"+ {read_ms:.0f} ms reading its pages from outside shared buffers"
    )
    if fixed:
        basis += f" ({fixed:.1f} ms of it fixed: its time on an empty copy, not scaled)"
    return scaled + read_ms, basis


def bytes_at_target(
    seen: Observation,
    sample: Mapping[str, Size],
    target: Mapping[str, Size],
    indexes: Mapping[str, str],
    reference: Mapping[str, Size] | None = None,
) -> tuple[int | None, int | None]:
    """(wal_bytes, extra_disk_bytes) of a statement on the target (None: not measured on the
    sample, a Python revision's statement): what it wrote on the
    sample, scaled by the bytes its work covers there over the sample's (the table's heap
    and indexes for a rewrite, its heap for an index build or a scan; a sort's n·log n is
    time, not bytes). Catalog only: as on the sample. `reference`: as for `estimate`."""
    works = _works(seen, sample, target, indexes)
    ratios = [_bytes_ratio(w, sample[t], target[t], (reference or {}).get(t))
              for t, w in works.items()]  # fmt: skip
    factor = max(ratios) if ratios else 1.0
    wal, disk = seen.wal_bytes, seen.disk_bytes
    return (
        None if wal is None else round(wal * factor),
        None if disk is None else round(disk * factor),
    )


def _bytes_ratio(work: str, sample: Size, target: Size, reference: Size | None) -> float:
    """How the bytes of a kind of work grow from the sample to the target: never below the
    sample's own (earlier statements may have grown it), but down from a fleet group's
    largest target (`reference`) to a smaller one in proportion."""
    wanted = _scaled(work, target, sample)
    if reference is not None and wanted < _scaled(work, reference, sample):
        top = _scaled(work, reference, sample)
        return max(1.0, top / _scaled(work, sample)) * wanted / top
    return max(1.0, wanted / _scaled(work, sample))


def _scaled(work: str, size: Size, sample: Size | None = None) -> int:
    """The bytes a kind of work scales with: the heap; for a rewrite also TOAST and the
    indexes as it rebuilds them — `sample`'s index bytes per row times `size`'s rows (a
    freshly built index's size), at most `size`'s own index bytes (a tiny sample's index
    pages are mostly overhead), which are taken as they are when a row count is unknown."""
    if work != "rewrites":
        return size.heap
    if sample is None or not sample.rows or size.rows is None:
        return size.bytes
    rebuilt = min(size.index_bytes, round(sample.index_bytes * size.rows / sample.rows))
    return max(PAGE, size.heap_bytes + size.toast_bytes + rebuilt)


def _read(work: str, size: Size) -> int:
    """The bytes a kind of work reads: the heap, and a rewrite its TOAST too."""
    return max(PAGE, size.heap_bytes + (size.toast_bytes if work == "rewrites" else 0))


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


def _wal_basis(seen: Observation) -> str:
    if seen.wal_bytes is None:
        return "not measured (a Python revision's statement)"
    return "its session's" if seen.wal_own else "upper bound, server-wide"


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
        "wal_bytes": line.wal_bytes,
        "wal_basis": _wal_basis(s),
        "extra_disk_bytes": line.extra_disk_bytes,
        "verdict": line.verdict,
        "safer": line.safer,
        **({"origin": s.origin} if s.origin else {}),
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
