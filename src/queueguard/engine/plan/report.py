"""`plan`'s text rendering: one block per revision, one line per statement (pure)."""

from __future__ import annotations

from queueguard.engine.plan.bill import Line
from queueguard.engine.plan.planner import Plan
from queueguard.report.units import duration_ms

_MARK = {"ok": " ", "blocks-writes": "w", "blocks-reads": "R", "exceeds-max-lock": "!"}


_ms = duration_ms


def _first_line(sql: str) -> str:
    text = " ".join(sql.split())
    return text if len(text) <= 70 else text[:67] + "..."


def _line(line: Line) -> list[str]:
    s = line.seen
    locks = ", ".join(f"{rel} {mode}" for rel, mode in s.locks) or "no lock on existing tables"
    what = []
    if s.rewrites:
        what.append("rewrites " + ", ".join(s.rewrites))
    if s.scans:
        what.append("scans " + ", ".join(s.scans))
    kind = "" if s.transactional else " (outside a transaction)"
    out = [
        f" {_MARK.get(line.verdict, '?')} {line.index + 1:>3}. {_first_line(s.sql)}{kind}",
        f"        {locks}; {'; '.join(what) or 'catalog only'}",
        f"        runs ~{_ms(line.estimate_ms)}, locks held ~{_ms(line.held_ms)}: {line.verdict}",
    ]
    for b in line.waits_behind:
        out.append(
            f"        would queue behind pid {b.pid} ({b.state}, transaction open "
            f"{_ms(b.age_ms)}) holding {b.mode} on {b.relation}: {_first_line(b.query)}"
        )
    if line.verdict == "exceeds-max-lock" and line.safer:
        out.append(f"        safer: {line.safer}")
    return out


def _at(plan: Plan) -> str:
    if plan.format == "django":  # an applied set: each app's latest applied migration
        latest = ", ".join(f"{a}.{n}" for a, n in sorted(plan.latest_applied.items()))
        return latest or "no migration applied"
    return plan.current or "an empty schema"


def render_text(plan: Plan) -> str:
    lines = [
        f"plan ({plan.format}): the target is at {_at(plan)}, "
        f"{len(plan.revisions)} revision(s) pending up to {plan.target}"
    ]
    for rid, statements in plan.revisions:
        notes = [f"    note: {note}" for note in plan.notes.get(rid, [])]
        if not statements:  # a branch for another dialect, a version without files
            lines += [f"revision {rid}: no statement on PostgreSQL", *notes]
            continue
        lines += [f"revision {rid}: {len(statements)} statement(s)", *notes]
        for line in statements:
            lines.extend(_line(line))
    if plan.max_lock_ms is not None:
        if plan.over:
            lines.append(render_over(plan))
        else:
            lines.append(f"every blocking lock is held under --max-lock {_ms(plan.max_lock_ms)}")
    return "\n".join(lines)


def render_over(plan: Plan) -> str:
    """The statements over --max-lock: statement, table, mode, estimate, a safer form."""
    over = plan.over
    lines = [
        f"{len(over)} statement(s) would hold a blocking lock longer than "
        f"--max-lock {_ms(plan.max_lock_ms or 0)}:"
    ]
    for line in over:
        rel, mode = line.blocking[0]
        lines.append(
            f"  revision {line.revision} statement {line.index + 1}: {mode} on {rel} "
            f"held ~{_ms(line.held_ms)} (runs ~{_ms(line.estimate_ms)}): "
            f"{_first_line(line.seen.sql)}"
        )
        if line.safer:
            lines.append(f"    safer: {line.safer}")
    return "\n".join(lines)
