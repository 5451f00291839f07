"""`plan --online`: the online bill (pure) — per statement over the budget its forms, the
longest read- or write-blocking lock they take, the extra disk they need and how long they
run, from `plan`'s estimate of the plain statement and the target's sizes.

The locks are PostgreSQL's documented modes for each step; every blocking one is taken for
a catalog change only (no scan, no rewrite under it), which is what keeps it brief — the
proof measures it on the scratch copy. A concurrent build scans the table twice (twice the
plain build); a rebuild copies the table once, as the plain rewrite does, then builds its
indexes and replays the writers' changes: the same work as the plain statement, outside the
lock, and the table and its indexes once more on disk until the swap.

WAL: each form writes what the plain statement writes (plan's `wal_bytes` at the target's
size: a concurrent build's two scans write one index; a validation's scan writes almost
nothing either way), and a rebuild adds its change log: for each change the writers make
while it runs (the target's rate, read from its statistics over a few seconds), a row of the
log and its replay into the shadow, each the table's average row and a WAL record's header,
and an entry in each of the shadow's indexes."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from queueguard.engine.online import choose
from queueguard.engine.online.decide import Decision
from queueguard.engine.plan.bill import Size
from queueguard.report.units import size_bytes

#: the longest read- or write-blocking lock each form takes, and on what
LOCKS = {
    choose.CONCURRENT_INDEX: "none (SHARE UPDATE EXCLUSIVE while it builds)",
    choose.NOT_VALID: "the plain statement's mode, for the catalog change only; "
    "VALIDATE under SHARE UPDATE EXCLUSIVE",
    choose.NOT_NULL: "ACCESS EXCLUSIVE three times, for catalog changes only",
    choose.UNIQUE_INDEX: "ACCESS EXCLUSIVE for ADD CONSTRAINT … USING INDEX (catalog only)",
    choose.REBUILD: "ACCESS EXCLUSIVE for the swap: the last changes replayed and the catalog "
    "swapped",
    choose.PLAIN: "the subcommand's own, catalog only",
}
#: how much of the plain statement's work each form does (outside the lock)
WORK = {
    choose.CONCURRENT_INDEX: 2.0,
    choose.UNIQUE_INDEX: 2.0,
    choose.NOT_VALID: 1.0,
    choose.NOT_NULL: 1.0,
    choose.REBUILD: 1.0,
    choose.PLAIN: 0.0,
}


#: how long `plan --online` watches the target's statistics for the writers' rate
WRITE_WINDOW_S = 2.0
#: a WAL record's header and its tuple's, per row written (an estimate: PostgreSQL's
#: XLogRecord, the heap record and a tuple header are about this together)
RECORD_BYTES = 100
#: one index entry's WAL: a key of a few columns and the record around it
INDEX_ENTRY_BYTES = 64


def change_log_wal(size: Size | None, changes_per_s: float, seconds: float) -> int:
    """The WAL a rebuild's change log adds while it runs `seconds` under writers changing
    `changes_per_s` rows a second of a table of `size` (pure)."""
    if size is None or changes_per_s <= 0 or seconds <= 0:
        return 0
    width = size.heap_bytes / max(size.rows or 1, 1)
    per_change = 2 * (width + RECORD_BYTES) + size.indexes * INDEX_ENTRY_BYTES
    return int(changes_per_s * seconds * per_change)


def _table_size(table: str, sizes: Mapping[str, Size]) -> Size | None:
    return sizes.get(table) or sizes.get(table.rpartition(".")[2])


def row(
    decision: Decision, sizes: Mapping[str, Size], rates: Mapping[str, float] | None = None
) -> dict[str, Any]:
    """One statement of the online bill, as `plan --online --json` gives it. `rates`: {table:
    rows the writers change a second} on the target."""
    line = decision.line
    doc: dict[str, Any] = {
        "revision": decision.revision,
        "statement": decision.index + 1,
        "sql": line.seen.sql,
        "plain_lock_ms": round(line.estimate_ms, 1),
        "refusal": decision.refusal,
        "forms": [],
    }
    if not decision.forms:
        return doc
    extra = 0
    for form in decision.forms:
        if form.kind == choose.REBUILD and (size := _table_size(form.table, sizes)):
            extra += size.bytes
    doc["forms"] = [
        {"kind": f.kind, "table": f.table, "longest_lock": LOCKS[f.kind]} for f in decision.forms
    ]
    doc["extra_disk_bytes"] = extra
    doc["estimate_ms"] = round(line.estimate_ms * max(WORK[f.kind] for f in decision.forms), 1)
    log = sum(
        change_log_wal(
            _table_size(f.table, sizes),
            _rate(f.table, rates or {}),
            doc["estimate_ms"] / 1000,
        )
        for f in decision.forms
        if f.kind == choose.REBUILD
    )
    doc["change_log_wal_bytes"] = log
    doc["wal_bytes"] = None if line.wal_bytes is None else line.wal_bytes + log
    return doc


def _rate(table: str, rates: Mapping[str, float]) -> float:
    return rates.get(table) or rates.get(table.rpartition(".")[2]) or 0.0


def render(rows: list[dict[str, Any]], budget_ms: float) -> str:
    if not rows:
        return f"online: no statement over the {_ms(budget_ms)} lock budget: nothing to run online"
    out = [f"online: {len(rows)} statement(s) over the {_ms(budget_ms)} lock budget"]
    for r in rows:
        text = " ".join(r["sql"].split())
        out.append(
            f"  revision {r['revision']} statement {r['statement']}: "
            f"{text if len(text) <= 70 else text[:67] + '...'}"
        )
        if r["refusal"]:
            out.append(f"      no online form: {r['refusal']} (--force runs it plain)")
            continue
        for form in r["forms"]:
            out.append(
                f"      {form['kind']} on {form['table']}: longest lock {form['longest_lock']}"
            )
        disk = r["extra_disk_bytes"]
        out.append(
            f"      ~{_ms(r['estimate_ms'])} outside the lock (plain: the lock held "
            f"~{_ms(r['plain_lock_ms'])})"
            + (f"; extra disk {disk / 1024 / 1024:.1f} MB until the swap" if disk else "")
        )
        if r["wal_bytes"] is not None:
            log = r["change_log_wal_bytes"]
            out.append(
                f"      WAL ~{size_bytes(r['wal_bytes'])}"
                + (f" (the change log's ~{size_bytes(log)} at the writers' rate)" if log else "")
            )
    return "\n".join(out)


def _ms(value: float) -> str:
    if value >= 60_000:
        return f"{value / 60_000:.1f} min"
    if value >= 1000:
        return f"{value / 1000:.1f} s"
    return f"{value:.0f} ms"
