"""`rehearse --output markdown` (pure: rehearse's JSON document in, Markdown out), for both
documents: queueguard's own set (the conservation laws on a copy, the queues after) and a set
of another format (per revision, each statement's real time and lock hold on the copy next
to `plan`'s estimate; the invariants).
"""

from __future__ import annotations

from itertools import groupby
from typing import Any

from queueguard.report import markdown as md
from queueguard.report.units import count, duration_ms, lock_mode

COMMAND = "rehearse"
QUEUE_HEADER = ("Queue", "Range", "Ack level", "Last task id", "Rows")
STATEMENT_HEADER = ("#", "Statement", "Table", "Lock", "Took", "Held", "Plan: run", "Plan: held")
INVARIANT_HEADER = ("Invariant", "Result", "Detail")


def _own(doc: dict[str, Any]) -> str:
    source = doc["source_revision"] or "an empty database"
    verdict = (
        f"{md.status(doc['ok'])} queueguard rehearse: "
        + ("conservation laws hold" if doc["ok"] else count(len(doc["violations"]), "violation"))
        + f" (upgrade of a {doc['method']} copy at {source})"
    )
    body = [
        f"The upgrade ran on a {doc['method']} copy of the database in "
        f"{duration_ms(doc['elapsed_ms'])}; every task payload kept, none invented, each queue's "
        "counters and fence checked.",
        "",
    ]
    if doc["violations"]:
        body += [*[f"- {md.text(v)}" for v in doc["violations"]], ""]
    rows = [
        [md.code(q["queue"]), str(q["range"]), str(q["ack"]), str(q["last"]), str(q["rows"])]
        for q in doc["queues"]
    ]
    if rows:
        table = md.table(QUEUE_HEADER, rows, "lrrrr")
        body += [*md.details(f"{count(len(rows), 'queue')} after the upgrade", table), ""]
    return md.comment(md.heading(3, verdict), body, COMMAND)


def _statement_row(s: dict[str, Any]) -> list[str]:
    statement = md.code(md.shorten(s["sql"]))
    if not s["transactional"]:
        statement += "<br>outside a transaction"
    return [
        str(s["index"] + 1),
        statement,
        md.lines([lock["relation"] for lock in s["locks"]]),
        md.lines([lock_mode(lock["mode"]) for lock in s["locks"]]),
        duration_ms(s["took_ms"]),
        duration_ms(s["held_ms"]),
        duration_ms(s["estimate_ms"], unknown=md.EMPTY),
        duration_ms(s["estimate_held_ms"], unknown=md.EMPTY),
    ]


def _set(doc: dict[str, Any]) -> str:
    failed = [c for c in doc["checks"] if not c["ok"]]
    moved = f"{doc['before'] or 'empty'} → {doc['after'] or 'empty'}"
    invariants = (
        f"{count(len(failed), 'invariant')} of {len(doc['checks'])} failed"
        if failed
        else "every invariant holds"
        if doc["checks"]
        else "no invariants given"
    )
    verdict = (
        f"{md.status(doc['ok'])} queueguard rehearse ({doc['format']}): {moved} on a "
        f"{doc['method']} copy, {invariants}"
    )
    body = [
        f"The pending revisions applied to a {doc['method']} copy by the runner `upgrade` uses, "
        f"in {duration_ms(doc['elapsed_ms'])}; each statement's time and lock hold there, next "
        "to `plan`'s estimate.",
        "",
    ]
    if doc["checks"]:
        rows = [
            [
                md.code(c["subject"] or c["name"]),
                "passed" if c["ok"] else "**failed**",
                md.text(c["detail"]) if c["detail"] else md.EMPTY,
            ]
            for c in doc["checks"]
        ]
        body += [*md.table(INVARIANT_HEADER, rows), ""]
        for c in failed:
            problems = [f"- {md.text(p)}" for p in c["problems"]]
            if problems:
                body += [*md.details(f"{c['subject'] or c['name']}", problems), ""]
    for revision, statements in groupby(doc["statements"], key=lambda s: s["revision"]):
        listed = list(statements)
        body += [md.heading(4, f"Revision {md.code(revision)}"), ""]
        body += md.table(STATEMENT_HEADER, [_statement_row(s) for s in listed], "rlllrrrr")
        for s in listed:
            if md.is_long(s["sql"]):
                full = md.fenced(s["sql"], "sql")
                body += ["", *md.details(f"Statement {s['index'] + 1} in full", full)]
        body.append("")
    return md.comment(md.heading(3, verdict), body, COMMAND)


def markdown(doc: dict[str, Any]) -> str:
    """The comment for one rehearse document (either kind)."""
    return _own(doc) if "queues" in doc else _set(doc)
