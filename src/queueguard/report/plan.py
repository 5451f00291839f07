"""`plan --output markdown`: the downtime bill as a pull-request comment (pure: the plan's
JSON document in, Markdown out).

The first line is the verdict (what a notification shows); then one table per pending
revision, one row per statement: the statement shortened, the tables it locks and in which
modes, how long the locks stay held and how long it runs at the target's size (and how that
estimate was reached), what it rewrites or scans, its verdict and a safer form where one is
known — or, from `plan --online`, the online forms it will run in. A long statement, and the
sessions a statement would queue behind, are in `<details>` under its revision's table.
"""

from __future__ import annotations

from typing import Any

from queueguard.report import markdown as md
from queueguard.report.units import count, duration_ms, lock_mode, size_bytes

COMMAND = "plan"
HEADER = (
    "#",
    "Statement",
    "Table",
    "Lock",
    "Held",
    "Estimate",
    "Basis",
    "Rewrite / scan",
    "Verdict",
    "Safer form",
    "WAL / new files",
)
ALIGN = "rlllrrllllr"
#: the statement verdicts a plan document holds (docs/interfaces.md, "Plan JSON")
VERDICTS = ("ok", "blocks-writes", "blocks-reads", "exceeds-max-lock")


def _statements(doc: dict[str, Any]) -> list[dict[str, Any]]:
    return [s for r in doc["revisions"] for s in r["statements"]]


def verdict(doc: dict[str, Any]) -> str:
    """`2 statements over the 1 s lock budget, 1 table rewritten`."""
    statements = _statements(doc)
    if not doc["revisions"]:
        at = _at(doc) or "nothing applied"
        return f"{md.status(True)} queueguard plan: nothing pending (the target is at {at})"
    by = {v: sum(s["verdict"] == v for s in statements) for v in VERDICTS}
    parts = []
    if by["exceeds-max-lock"]:
        budget = duration_ms(doc["maxLockMs"])
        parts.append(f"{count(by['exceeds-max-lock'], 'statement')} over the {budget} lock budget")
    if by["blocks-reads"]:
        parts.append(f"{count(by['blocks-reads'], 'statement')} blocking reads")
    if by["blocks-writes"]:
        parts.append(f"{count(by['blocks-writes'], 'statement')} blocking writes")
    if not parts:
        parts.append("no statement blocks reads or writes")
    rewritten = sorted({t for s in statements for t in s["rewrites"]})
    if rewritten:
        parts.append(f"{count(len(rewritten), 'table')} rewritten")
    blocking = any(s["verdict"] != "ok" for s in statements)
    return f"{md.status(doc['ok'], blocking)} queueguard plan: {', '.join(parts)}"


def _at(doc: dict[str, Any]) -> str | None:
    """Where the target is: its revision, or its heads (an Alembic set at several)."""
    heads = doc.get("currentHeads") or []
    return doc["current"] or (", ".join(heads) if heads else None)


def _summary(doc: dict[str, Any]) -> str:
    at = f"is at `{_at(doc)}`" if _at(doc) else "has nothing of the set applied"
    pending = count(len(doc["revisions"]), "revision")
    budget = (
        f"; lock budget (`--max-lock`) {duration_ms(doc['maxLockMs'])}"
        if doc["maxLockMs"] is not None
        else ""
    )
    to = doc["target"] or ", ".join(doc.get("targetHeads") or [])
    return (
        f"The {doc['format']} set: the target {at}, {pending} pending up to `{to}`, "
        f"{count(len(_statements(doc)), 'statement')}. Each statement was observed on a "
        f"scratch copy holding {doc['sampleRows']} rows per table; times are scaled to the "
        f"target's size{budget}."
    )


def _what(s: dict[str, Any]) -> str:
    what = [f"rewrites {', '.join(s['rewrites'])}"] if s["rewrites"] else []
    what += [f"scans {', '.join(s['scans'])}"] if s["scans"] else []
    return md.lines(what) if what else "catalog only"


def _online(doc: dict[str, Any]) -> dict[tuple[str, str], str]:
    """`plan --online`: {(revision, statement): its online forms, or why it has none}."""
    found: dict[tuple[str, str], str] = {}
    for r in doc.get("online") or ():
        kinds = ", ".join(f["kind"] for f in r["forms"])
        how = f"online: {kinds}" if kinds else f"no online form: {r['refusal']}"
        found[(r["revision"], r["sql"])] = how
    return found


def _row(s: dict[str, Any], online: str | None = None) -> list[str]:
    statement = md.code(md.shorten(s["sql"]))
    if not s["transactional"]:
        statement += "<br>outside a transaction"
    verdict_cell = s["verdict"] if s["verdict"] == "ok" else f"**{s['verdict']}**"
    return [
        str(s["index"] + 1),
        statement,
        md.lines([lock["relation"] for lock in s["locks"]]),
        md.lines([lock_mode(lock["mode"]) for lock in s["locks"]]),
        duration_ms(s["held_ms"]),
        duration_ms(s["estimate_ms"]),
        md.text(s["basis"]),
        _what(s),
        verdict_cell,
        md.text(online or s["safer"]) if (online or s["safer"]) else md.EMPTY,
        f"{size_bytes(s.get('wal_bytes'))}<br>{size_bytes(s.get('extra_disk_bytes'))}",
    ]


def _waits(s: dict[str, Any]) -> list[str]:
    return [
        f"- pid {w['pid']} ({md.text(w['state'] or 'no state')}, transaction open "
        f"{duration_ms(w['age_ms'])}) holds {lock_mode(w['mode'])} on {md.text(w['relation'])}: "
        f"{md.code(md.shorten(w['query']))}"
        for w in s["waits_behind"]
    ]


def _details(s: dict[str, Any]) -> list[str]:
    """The statement in full (when its cell is cut) and whom it would queue behind."""
    body: list[str] = []
    long = md.is_long(s["sql"])
    if long:
        body += md.fenced(s["sql"].strip(), "sql")
    if s["waits_behind"]:
        sessions = count(len(s["waits_behind"]), "session")
        body += ["", f"Would queue behind {sessions} on the target now:", "", *_waits(s)]
    if not body:
        return []
    what = ["in full"] if long else []
    if s["waits_behind"]:
        what.append(f"queues behind {count(len(s['waits_behind']), 'session')}")
    return md.details(f"Statement {s['index'] + 1} {', '.join(what)}", body)


def _revision(revision: dict[str, Any], online: dict[tuple[str, str], str]) -> list[str]:
    out = [md.heading(4, f"Revision {md.code(revision['id'])}"), ""]
    notes = revision.get("notes") or []
    if notes:
        out += [*(f"- {md.text(note)}" for note in notes), ""]
    statements = revision["statements"]
    if not statements:
        return [*out, "No statement on PostgreSQL.", ""]
    rows = [_row(s, online.get((revision["id"], s["sql"]))) for s in statements]
    out += md.table(HEADER, rows, ALIGN)
    for s in statements:
        extra = _details(s)
        if extra:
            out += ["", *extra]
    return [*out, ""]


def markdown(doc: dict[str, Any]) -> str:
    """The comment for one plan document."""
    body = [_summary(doc), ""] if doc["revisions"] else []
    online = _online(doc)
    for revision in doc["revisions"]:
        body += _revision(revision, online)
    return md.comment(md.heading(3, verdict(doc)), body, COMMAND)
