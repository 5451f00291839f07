"""`lint --output markdown` (pure: lint's JSON document in, Markdown out), for both
documents: queueguard's gate (findings by file, the silenced ones in `<details>`) and a set
of another format (one row per flagged statement, by revision: where it starts, the
statement, the finding that matters, its cost, what else squawk found on it).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from itertools import groupby
from typing import Any

from queueguard.report import markdown as md
from queueguard.report.units import count, listing

COMMAND = "lint"
FINDING_HEADER = ("Line", "Code", "Finding", "Hint")
SILENCED_HEADER = ("File", "Line", "Code", "Justification")
STATEMENT_HEADER = ("Where", "Statement", "Tier", "Finding", "Cost", "Also on it")


# --- queueguard's gate -------------------------------------------------------------------------
def _gate(doc: dict[str, Any]) -> str:
    findings = doc["findings"]
    files = sorted({f["file"] for f in findings})
    silenced = doc["silenced"]
    quiet = (
        f", {count(len(silenced), 'finding')} silenced by lint-allow markers" if silenced else ""
    )
    what = (
        f"clean in {count(doc['files'], 'file')}{quiet}"
        if doc["ok"]
        else f"{count(len(findings), 'finding')} in {count(len(files), 'file')}{quiet}"
    )
    body: list[str] = []
    for file, in_file in groupby(
        sorted(findings, key=lambda f: f["file"]), key=lambda f: f["file"]
    ):
        rows = [
            [
                f"{f['line']}:{f['column']}",
                md.code(f["code"]),
                md.text(f["message"]),
                md.text(f["hint"]),
            ]
            for f in in_file
        ]
        body += [md.heading(4, md.code(file)), "", *md.table(FINDING_HEADER, rows, "r"), ""]
    if silenced:
        rows = [
            [md.code(s["file"]), str(s["line"]), md.code(s["code"]), md.text(s["justification"])]
            for s in silenced
        ]
        table = md.table(SILENCED_HEADER, rows, "lr")
        body += [*md.details(f"{count(len(silenced), 'silenced finding')}", table), ""]
    squawk = f", squawk {doc['squawk']}" if doc["squawk"] else ""
    body.append(f"squawk's rules and queueguard's own over {count(doc['files'], 'file')}{squawk}.")
    verdict = f"{md.status(doc['ok'])} queueguard lint: {what}"
    return md.comment(md.heading(3, verdict), body, COMMAND)


# --- a set of another format -------------------------------------------------------------------
def _also(doc: dict[str, Any]) -> dict[tuple[str, int], list[str]]:
    """The rules of each statement's findings other than its chosen one."""
    found: dict[tuple[str, int], list[str]] = defaultdict(list)
    for f in doc["findings"]:
        if not f["chosen"]:
            found[(f["revision"], f["statement"])].append(f["code"].removeprefix("squawk."))
    return found


def _where(s: dict[str, Any]) -> str:
    """`file:line`, and `:column` when the statement is not the first on its line."""
    column = f":{s['column']}" if s["column"] > 1 else ""
    return f"{s['file']}:{s['line']}{column}"


def _set_verdict(doc: dict[str, Any]) -> str:
    flagged = [s for s in doc["statements"] if s["severity"] != "note"]
    notes = len(doc["statements"]) - len(flagged)
    tiers = Counter(s["tier"] for s in flagged)
    if flagged:
        by_tier = listing(f"{n} {tier}" for tier, n in tiers.items())
        what = f"{count(len(flagged), 'statement')} flagged ({by_tier})"
    else:
        what = f"clean in {count(doc['files'], 'file')}"
    if notes:
        what += f", {count(notes, 'note')}"
    return f"{md.status(doc['ok'], bool(notes))} queueguard lint ({doc['format']}): {what}"


def _set(doc: dict[str, Any]) -> str:
    also = _also(doc)
    body = [
        f"One finding per statement, the one that matters in lock-mode terms "
        f"({count(len(doc['findings']), 'squawk finding')} in all over "
        f"{count(doc['files'], 'file')})"
        + (
            f"; observed on a copy of the target at {doc['target_at'] or 'no revision'}"
            if doc["observed"]
            else ""
        )
        + ".",
        "",
    ]
    for revision, in_revision in groupby(doc["statements"], key=lambda s: s["revision"]):
        rows = []
        listed = list(in_revision)
        for s in listed:
            others = also.get((s["revision"], s["index"]), [])
            rows.append(
                [
                    md.code(_where(s)),
                    md.code(md.shorten(s["sql"])) if s["sql"] else md.EMPTY,
                    s["tier"] if s["severity"] == "note" else f"**{s['tier']}**",
                    md.code(s["code"]),
                    md.text(s["cost"]),
                    md.text(listing(others)) if others else md.EMPTY,
                ]
            )
        body += [md.heading(4, f"Revision {md.code(revision)}"), ""]
        body += [*md.table(STATEMENT_HEADER, rows), ""]
    if doc["python_revisions"]:
        body += [
            f"Not linted ({count(len(doc['python_revisions']), 'Python revision')} that cannot "
            f"render as SQL offline): {md.text(listing(doc['python_revisions']))}.",
            "",
        ]
    return md.comment(md.heading(3, _set_verdict(doc)), body, COMMAND)


def markdown(doc: dict[str, Any]) -> str:
    """The comment for one lint document (either kind)."""
    return _set(doc) if "statements" in doc else _gate(doc)
