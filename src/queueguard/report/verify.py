"""`verify --output markdown` (pure: verify's JSON document in, Markdown out), for both
documents verify prints: queueguard's own set against its golden fixtures (`fixtures`), and
a set of another format (`revisions`, `checks`).

Own set: the verdict, a table of the fixtures, then per fixture a table of its checks (the
first line of each detail; a longer detail, such as a failed check's diff, in `<details>`),
and the compatibility matrix's verdict. Another format: the verdict, a table of the checks
(problems and notes in `<details>`), then per revision a table of the statements as the
chain applied them.
"""

from __future__ import annotations

from typing import Any

from queueguard.report import markdown as md
from queueguard.report.units import count, duration_ms, duration_s, listing, lock_mode, words

COMMAND = "verify"
FIXTURE_HEADER = ("Fixture", "Revision", "Checks", "Failed", "Time")
CHECK_HEADER = ("Check", "Result", "Detail")
SET_CHECK_HEADER = ("Check", "Subject", "Result", "Detail")
STATEMENT_HEADER = ("#", "Statement", "Table", "Lock", "Ran", "Held", "Rewrite / scan")


def result(ok: bool) -> str:
    """A check's Result cell."""
    return "passed" if ok else "**failed**"


def _first_line(detail: str) -> str:
    first = detail.strip().splitlines()[0] if detail.strip() else ""
    return md.text(first) if first else md.EMPTY


def _multi_line(detail: str) -> bool:
    return len(detail.strip().splitlines()) > 1


# --- queueguard's own set ----------------------------------------------------------------------
def _own_verdict(doc: dict[str, Any]) -> str:
    fixtures = doc["fixtures"]
    failed = [
        f"{f['fixture']}: {listing(c['name'] for c in f['checks'] if not c['ok'])}"
        for f in fixtures
        if not f["ok"]
    ]
    compat = doc.get("compatibility")
    unsafe = compat is not None and not compat["safe"]
    if doc["ok"]:
        return (
            f"{md.status(True)} queueguard verify: {count(len(fixtures), 'fixture')} "
            "upgrade to the golden state"
        )
    checks = sum(not c["ok"] for f in fixtures for c in f["checks"])
    parts = [f"{count(checks, 'check')} failed ({'; '.join(failed)})"] if checks else []
    if unsafe:
        parts.append("the compatibility matrix has violations")
    return f"{md.status(False)} queueguard verify: {', '.join(parts)}"


def _fixture(f: dict[str, Any]) -> list[str]:
    out = [md.heading(4, f"Fixture {md.code(f['fixture'])} (revision {f['revision']})"), ""]
    rows = [[md.code(c["name"]), result(c["ok"]), _first_line(c["detail"])] for c in f["checks"]]
    out += md.table(CHECK_HEADER, rows)
    for c in f["checks"]:
        if _multi_line(c["detail"]):
            verb = "passed" if c["ok"] else "failed"
            out += ["", *md.details(f"{c['name']} {verb}", md.fenced(c["detail"]))]
    return [*out, ""]


def _compatibility(compat: dict[str, Any] | None) -> list[str]:
    if compat is None:
        return []
    if compat["safe"]:
        return [
            f"Compatibility of the released workers with every revision "
            f"({listing(compat['revisions'])}): no released worker can write Matching state "
            f"on {compat['head']}.",
            "",
        ]
    return [
        "Compatibility violations:",
        "",
        *[f"- {md.text(v)}" for v in compat["violations"]],
        "",
    ]


def _own(doc: dict[str, Any]) -> str:
    fixtures = doc["fixtures"]
    rows = [
        [
            md.code(f["fixture"]),
            f["revision"],
            str(len(f["checks"])),
            str(sum(not c["ok"] for c in f["checks"])),
            duration_ms(f["elapsed_ms"]),
        ]
        for f in fixtures
    ]
    body = [
        "Each golden fixture loaded, preflighted, upgraded to head and compared with its "
        f"golden state, every column of every row and a fresh install, in "
        f"{duration_ms(doc['elapsed_ms'])}.",
        "",
        *md.table(FIXTURE_HEADER, rows, "llrrr"),
        "",
    ]
    for f in fixtures:
        body += _fixture(f)
    body += _compatibility(doc.get("compatibility"))
    return md.comment(md.heading(3, _own_verdict(doc)), body, COMMAND)


# --- a set of another format -------------------------------------------------------------------
def _check_name(c: dict[str, Any]) -> str:
    return f"{c['name']} {c['subject']}" if c["subject"] else c["name"]


def _set_verdict(doc: dict[str, Any]) -> str:
    checks = doc["checks"]
    failed = [_check_name(c) for c in checks if not c["ok"]]
    if doc["ok"]:
        what = f"every check passed ({count(len(checks), 'check')}), head {doc['head']}"
    else:
        what = f"{len(failed)} of {count(len(checks), 'check')} failed ({'; '.join(failed)})"
    return f"{md.status(doc['ok'])} queueguard verify ({doc['format']}): {what}"


def _check_details(c: dict[str, Any]) -> list[str]:
    if not c["problems"] and not c["notes"]:
        return []
    body = [f"- {md.text(p)}" for p in c["problems"]]
    body += [f"- note: {md.text(n)}" for n in c["notes"]]
    parts = [count(len(c["problems"]), "problem")] if c["problems"] else []
    parts += [count(len(c["notes"]), "note")] if c["notes"] else []
    return md.details(f"{_check_name(c)}: {words(parts)}", body)


def _statement_row(s: dict[str, Any]) -> list[str]:
    statement = md.code(md.shorten(s["sql"]))
    if not s["transactional"]:
        statement += "<br>outside a transaction"
    what = [f"rewrites {', '.join(s['rewrites'])}"] if s["rewrites"] else []
    what += [f"scans {', '.join(s['scans'])}"] if s["scans"] else []
    return [
        str(s["index"]),
        statement,
        md.lines([lock["relation"] for lock in s["locks"]]),
        md.lines([lock_mode(lock["mode"]) for lock in s["locks"]]),
        duration_s(s["seconds"]),
        duration_s(s["heldSeconds"], unknown=md.EMPTY),
        md.lines(what) if what else "catalog only",
    ]


def _set_revision(rev: dict[str, Any]) -> list[str]:
    title = f" {md.text(rev['title'])}" if rev["title"] else ""
    out = [md.heading(4, f"Revision {md.code(rev['id'])}{title}"), ""]
    if rev["statements"]:
        out += md.table(STATEMENT_HEADER, [_statement_row(s) for s in rev["statements"]])
    else:
        out.append("No statements.")
    if rev["error"]:
        out += ["", f"**Failed:** {md.text(rev['error'])}"]
    for s in rev["statements"]:
        if md.is_long(s["sql"]):
            out += ["", *md.details(f"Statement {s['index']} in full", md.fenced(s["sql"], "sql"))]
    return [*out, ""]


def _set(doc: dict[str, Any]) -> str:
    rows = [
        [
            md.code(c["name"]),
            md.text(c["subject"] or md.EMPTY),
            result(c["ok"]),
            md.text(c["detail"]),
        ]
        for c in doc["checks"]
    ]
    body = [
        f"The chain from an empty database to head ({count(len(doc['revisions']), 'revision')} "
        f"applied) and its checks, in {duration_ms(doc['elapsed_ms'])}.",
        "",
        *md.table(SET_CHECK_HEADER, rows),
        "",
    ]
    for c in doc["checks"]:
        extra = _check_details(c)
        if extra:
            body += [*extra, ""]
    for rev in doc["revisions"]:
        body += _set_revision(rev)
    return md.comment(md.heading(3, _set_verdict(doc)), body, COMMAND)


def markdown(doc: dict[str, Any]) -> str:
    """The comment for one verify document (either kind)."""
    return _own(doc) if "fixtures" in doc else _set(doc)
