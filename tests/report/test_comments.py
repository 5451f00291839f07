"""The pull-request comments (`--output markdown`): each golden comment in golden/ is what
its stored JSON document renders (documents of real runs, `make_golden.py`), and read back
with a Markdown parser its tables hold that document's values, cell by cell. A comment
shows no path of the machine that made it and no date; text of any kind survives a table
cell as it was. No database: the renderers are pure.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from queueguard import report
from queueguard.sets.split import code_of
from tests.report import make_golden
from tests.report.markdown_cells import Cell, Table, shows, sql_mode, table_under, tables

GOLDEN = Path(__file__).parent / "golden"
CASES = sorted(make_golden.CASES)
_DATE = re.compile(r"\b(19|20)\d\d-\d\d-\d\d\b")


def _doc(name: str) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((GOLDEN / f"{name}.json").read_text(encoding="utf-8"))
    return loaded


def _comment(name: str) -> str:
    return (GOLDEN / f"{name}.md").read_text(encoding="utf-8")


def _statement(cell: Cell, sql: str) -> None:
    """The statement cell: the statement without its leading comments, on one line, whole or
    cut with an ellipsis."""
    flat = " ".join(code_of(sql).split())
    shown = cell.code[0]
    if shown.endswith("…"):
        assert flat.startswith(shown.removesuffix("…")), (shown, flat)
    else:
        assert shown == flat


def _locks(cells: list[Cell], locks: list[dict[str, str]]) -> None:
    table, mode = cells
    if not locks:
        assert (table.text, mode.text) == ("—", "—")
        return
    assert table.lines == [lock["relation"] for lock in locks]
    assert mode.lines == [sql_mode(lock["mode"]) for lock in locks]


def _rewrites(cell: Cell, s: dict[str, Any]) -> None:
    what = [f"rewrites {', '.join(s['rewrites'])}"] if s["rewrites"] else []
    what += [f"scans {', '.join(s['scans'])}"] if s["scans"] else []
    assert cell.lines == (what or ["catalog only"])


@pytest.mark.parametrize("name", CASES)
def test_each_golden_comment_is_what_its_document_renders(name: str) -> None:
    command = make_golden.CASES[name][0]
    comment = _comment(name)
    assert report.comment(command, _doc(name)) == comment
    first, *_, last = comment.rstrip("\n").splitlines()
    assert first.startswith("### ") and "queueguard " + command in first
    assert last == f"<!-- queueguard:{command} -->"


@pytest.mark.parametrize("name", CASES)
def test_no_machine_path_and_no_date(name: str) -> None:
    doc, comment = _doc(name), _comment(name)
    assert not _DATE.search(comment)
    moved = {**doc, **{k: "/home/someone/else" for k in ("migrations", "root") if k in doc}}
    assert report.comment(make_golden.CASES[name][0], moved) == comment


@pytest.mark.parametrize("name", ["plan-temporal", "plan-alembic", "plan-sqldir"])
def test_plan_tables_hold_the_documents_statements(name: str) -> None:
    doc, comment = _doc(name), _comment(name)
    assert doc["revisions"]
    for revision in doc["revisions"]:
        heading = f"Revision {revision['id']}"
        if not revision["statements"]:
            assert heading not in [t.heading for t in tables(comment)]
            continue
        table = table_under(comment, heading)
        assert table.header[:4] == ["#", "Statement", "Table", "Lock"]
        assert len(table.rows) == len(revision["statements"])
        for row, s in zip(table.rows, revision["statements"], strict=True):
            assert row[0].text == str(s["index"] + 1)
            _statement(row[1], s["sql"])
            assert ("outside a transaction" in row[1].text) is (not s["transactional"])
            _locks(row[2:4], s["locks"])
            assert shows(row[4].text, s["held_ms"]), (row[4].text, s["held_ms"])
            assert shows(row[5].text, s["estimate_ms"]), (row[5].text, s["estimate_ms"])
            assert row[6].text == s["basis"]
            _rewrites(row[7], s)
            assert (row[8].text, row[8].strong) == (s["verdict"], s["verdict"] != "ok")
            assert row[9].text == (s["safer"] or "—")


def test_plan_verdict_counts_what_the_document_holds() -> None:
    doc = _doc("plan-sqldir")
    first = _comment("plan-sqldir").splitlines()[0]
    over = sum(
        s["verdict"] == "exceeds-max-lock" for r in doc["revisions"] for s in r["statements"]
    )
    assert f"{over} statements over the 5 ms lock budget" in first
    assert "1 table rewritten" in first and first.startswith("### ❌")


def _fixture_table(comment: str, fixture: dict[str, Any]) -> Table:
    return table_under(comment, f"Fixture {fixture['fixture']} (revision {fixture['revision']})")


def test_verify_tables_hold_every_fixtures_checks() -> None:
    doc, comment = _doc("verify-own"), _comment("verify-own")
    (summary,) = [t for t in tables(comment) if t.header[0] == "Fixture"]
    assert [r[0].text for r in summary.rows] == [f["fixture"] for f in doc["fixtures"]]
    for row, fixture in zip(summary.rows, doc["fixtures"], strict=True):
        assert row[2].text == str(len(fixture["checks"]))
        assert row[3].text == str(sum(not c["ok"] for c in fixture["checks"]))
        assert shows(row[4].text, fixture["elapsed_ms"])
        table = _fixture_table(comment, fixture)
        assert [r[0].text for r in table.rows] == [c["name"] for c in fixture["checks"]]
        for cells, check in zip(table.rows, fixture["checks"], strict=True):
            assert cells[1].text == ("passed" if check["ok"] else "failed")
            first = check["detail"].strip().splitlines()[0] if check["detail"].strip() else "—"
            assert cells[2].text == " ".join(first.split())
    assert doc["ok"] is comment.startswith("### ✅")


def test_set_verify_tables_hold_checks_and_statements() -> None:
    doc, comment = _doc("verify-temporal"), _comment("verify-temporal")
    (checks,) = [t for t in tables(comment) if t.header[:2] == ["Check", "Subject"]]
    assert [(r[0].text, r[1].text) for r in checks.rows] == [
        (c["name"], c["subject"] or "—") for c in doc["checks"]
    ]
    assert [r[2].text for r in checks.rows] == [
        "passed" if c["ok"] else "failed" for c in doc["checks"]
    ]
    for revision in doc["revisions"]:
        if not revision["statements"]:
            continue
        title = f" {revision['title']}" if revision["title"] else ""
        table = table_under(comment, f"Revision {revision['id']}{title}")
        for row, s in zip(table.rows, revision["statements"], strict=True):
            assert row[0].text == str(s["index"])
            _statement(row[1], s["sql"])
            _locks(row[2:4], s["locks"])
            assert shows(row[4].text, s["seconds"] * 1000)
            _rewrites(row[6], s)


@pytest.mark.parametrize("name", ["lint-own", "lint-findings"])
def test_lint_tables_hold_every_finding_by_file(name: str) -> None:
    doc, comment = _doc(name), _comment(name)
    for file in sorted({f["file"] for f in doc["findings"]}):
        table = table_under(comment, file, "Line")
        findings = [f for f in doc["findings"] if f["file"] == file]
        assert [(r[0].text, r[1].text, r[2].text, r[3].text) for r in table.rows] == [
            (f"{f['line']}:{f['column']}", f["code"], f["message"], f["hint"]) for f in findings
        ]
    silenced = [t for t in tables(comment) if t.header[-1] == "Justification"]
    rows = silenced[0].rows if silenced else []
    assert [(r[0].text, r[1].text, r[2].text, r[3].text) for r in rows] == [
        (s["file"], str(s["line"]), s["code"], s["justification"]) for s in doc["silenced"]
    ]


def test_set_lint_tables_hold_every_flagged_statement() -> None:
    doc, comment = _doc("lint-temporal"), _comment("lint-temporal")
    rows = [r for t in tables(comment) if t.heading.startswith("Revision ") for r in t.rows]
    assert len(rows) == len(doc["statements"]) > 0
    for row, s in zip(rows, doc["statements"], strict=True):
        column = f":{s['column']}" if s["column"] > 1 else ""
        assert row[0].text == f"{s['file']}:{s['line']}{column}"
        _statement(row[1], s["sql"])
        assert (row[2].text, row[3].text, row[4].text) == (s["tier"], s["code"], s["cost"])
        others = [
            f["code"].removeprefix("squawk.")
            for f in doc["findings"]
            if (f["revision"], f["statement"]) == (s["revision"], s["index"]) and not f["chosen"]
        ]
        assert row[5].text == (", ".join(others) or "—")


def test_rehearse_tables_hold_queues_and_statements() -> None:
    doc, comment = _doc("rehearse-own"), _comment("rehearse-own")
    (queues,) = tables(comment)
    assert [[c.text for c in r] for r in queues.rows] == [
        [q["queue"], str(q["range"]), str(q["ack"]), str(q["last"]), str(q["rows"])]
        for q in doc["queues"]
    ]
    doc, comment = _doc("rehearse-sqldir"), _comment("rehearse-sqldir")
    rows = [r for t in tables(comment) if t.heading.startswith("Revision ") for r in t.rows]
    for row, s in zip(rows, doc["statements"], strict=True):
        _statement(row[1], s["sql"])
        assert shows(row[4].text, s["took_ms"]) and shows(row[5].text, s["held_ms"])


HOSTILE = "a | b `c` *d* _e_ <script>x</script> [f](g) &amp; \\ ~~h~~ #1 !"


def test_any_text_survives_a_table_cell_as_it_was() -> None:
    statement = {
        "index": 0,
        "sql": f"-- header\nSELECT '{HOSTILE}' || ``` \n FROM t",
        "transactional": True,
        "locks": [{"relation": "we|ird", "mode": "ShareLock"}],
        "rewrites": [],
        "scans": ["we|ird"],
        "created": [],
        "estimate_ms": 1234.0,
        "held_ms": 61_000.0,
        "basis": HOSTILE,
        "verdict": "blocks-writes",
        "safer": HOSTILE + "\nsecond line",
        "waits_behind": [],
    }
    doc = {
        "schemaVersion": 1,
        "format": "sqldir",
        "current": None,
        "target": "1",
        "maxLockMs": None,
        "sampleRows": 10,
        "ok": True,
        "revisions": [{"id": "1", "statements": [statement]}],
    }
    comment = report.comment("plan", doc)
    (row,) = table_under(comment, "Revision 1").rows
    _statement(row[1], statement["sql"])
    assert row[2].text == "we|ird" and row[3].text == "SHARE"
    assert (row[4].text, row[5].text) == ("1.0 min", "1.2 s")
    assert row[6].text == HOSTILE and row[9].text == HOSTILE + " second line"
    assert comment.startswith("### ⚠️ queueguard plan: 1 statement blocking writes")
