"""`verify --migrations DIR` on sets of other formats, on the embedded server: every format
verifies green (chain traced revision by revision, rerun a no-op, bookkeeping at head); a
fresh-install script that lacks a column fails naming it; a statement that errors fails
naming its revision and statement; a frozen fixture upgrades with its invariants holding,
and a revision that loses a row fails the invariant that sees it. The pure half (fixture
names, invariants files, multisets, catalog differences) is checked without a server.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from queueguard import sets
from queueguard.cli import main
from queueguard.engine import catalog
from queueguard.engine.verify import report as checks
from queueguard.engine.verify.checks import verify
from queueguard.errors import UsageError
from queueguard.pg import tools
from tests.engine import make_fixtures

HERE = Path(__file__).parent
DATA = HERE.parent / "sets" / "data"
TEMPORAL = DATA / "temporal"
FRESH = DATA / "temporal_fresh.sql"
FIXTURES = HERE / "fixtures"
INVARIANTS = HERE / "invariants.sql"
FIXTURE = "0.2--two-kennels.sql"


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, Any]:
    code = main(["verify", *argv, "--json"])
    return code, json.loads(capsys.readouterr().out)


def _checks(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """{name or `name subject`: check}."""
    return {c["name"] + (f" {c['subject']}" if c["subject"] else ""): c for c in doc["checks"]}


def _copy(tmp_path: Path, source: Path) -> Path:
    folder = tmp_path / source.name
    shutil.copytree(source, folder)
    return folder


# --- each format green -----------------------------------------------------------------------
def test_temporal_verifies_with_its_fresh_script_fixtures_and_invariants(
    pg_admin_dsn: str,
    make_db: Callable[..., str],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # the committed .sql fixture, and the same database as a pg_dump -Fc archive
    fixtures = tmp_path / "fixtures"
    fixtures.mkdir()
    shutil.copy(FIXTURES / FIXTURE, fixtures)
    frozen = make_db()
    loaded = tools.run(
        "psql", frozen, ["-v", "ON_ERROR_STOP=1", "-q", "-f", str(FIXTURES / FIXTURE)]
    )
    assert loaded.returncode == 0, loaded.stderr
    dumped = tools.run("pg_dump", frozen, ["-Fc", "-f", str(fixtures / "v0.2--archived.dump")])
    assert dumped.returncode == 0, dumped.stderr
    code, doc = _run(
        capsys,
        "--migrations", str(TEMPORAL), "--dsn", pg_admin_dsn, "--fresh", str(FRESH),
        "--fixtures", str(fixtures), "--invariants", str(INVARIANTS),
    )  # fmt: skip
    assert code == 0, json.dumps(doc["checks"], indent=1)
    assert doc["ok"] and doc["format"] == "temporal" and doc["head"] == "1.10"
    assert [r["id"] for r in doc["revisions"]] == ["0.1", "0.2", "1.0", "1.9", "1.10"]
    index = doc["revisions"][1]["statements"][1]  # 0.2's CREATE INDEX, traced
    assert index["sql"].startswith("CREATE INDEX walks_started_at_idx")
    assert {"relation": "walks", "mode": "ShareLock"} in index["locks"]
    assert index["scans"] == ["walks"] and index["heldSeconds"] is not None
    add = doc["revisions"][4]["statements"][0]
    assert add["locks"] == [{"relation": "dogs", "mode": "AccessExclusiveLock"}]
    found = _checks(doc)
    assert set(found) == {
        "chain", "rerun", "bookkeeping", "fresh",
        f"fixture {FIXTURE}", "fixture v0.2--archived.dump",
        f"invariant dogs_per_kennel on {FIXTURE}",
        f"invariant walked_minutes_per_dog on {FIXTURE}",
        "invariant dogs_per_kennel on v0.2--archived.dump",
        "invariant walked_minutes_per_dog on v0.2--archived.dump",
    }  # fmt: skip
    # a column in another place is a note, not a difference
    assert found["fresh"]["notes"] == [
        "column order of dogs: upgraded kennel_id, dog_id, name, born, walked_minutes; "
        "fresh kennel_id, dog_id, born, name, walked_minutes"
    ]
    assert "read as this copy's" in found[f"fixture {FIXTURE}"]["notes"][0]
    assert "applied 1.0, 1.9, 1.10" in found["fixture v0.2--archived.dump"]["detail"]


def test_alembic_verifies_with_its_python_revisions_traced(pg_admin_dsn: str) -> None:
    mset = sets.load(DATA / "alembic_plain")
    report = verify(mset, pg_admin_dsn)
    assert report.ok, checks.render_text(report)
    assert [c.name for c in report.checks] == ["chain", "rerun", "bookkeeping"]
    first, _, last = report.revisions
    assert any("CREATE TABLE item" in s.sql for s in first.statements)
    concurrent = [s for s in last.statements if "CONCURRENTLY" in s.sql]
    assert concurrent and not concurrent[0].transactional


SQLDIR = {
    "V1__accounts.sql": "CREATE TABLE accounts (id bigint PRIMARY KEY, email text);\n"
    "INSERT INTO accounts SELECT g, 'a' || g || '@x' FROM generate_series(1, 50) g;",
    "V2__email_index.sql": "ALTER TABLE accounts ADD COLUMN verified boolean;\n"
    "CREATE UNIQUE INDEX CONCURRENTLY accounts_email ON accounts (email);\n"
    "UPDATE accounts SET verified = false;",
}


def test_sqldir_verifies_and_renders_text(
    pg_admin_dsn: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "sqldir"
    folder.mkdir()
    for name, text in SQLDIR.items():
        (folder / name).write_text(text)
    fresh = tmp_path / "fresh.sql"
    fresh.write_text(
        "CREATE TABLE accounts (id bigint PRIMARY KEY, email text, verified boolean);\n"
        "CREATE UNIQUE INDEX accounts_email ON accounts (email);"
    )
    code = main(
        ["verify", "--migrations", str(folder), "--dsn", pg_admin_dsn, "--fresh", str(fresh)]
    )
    out = capsys.readouterr().out
    assert code == 0, out
    assert "revision 2 (email index): 3 statement(s)" in out
    assert "CREATE UNIQUE INDEX CONCURRENTLY accounts_email ON accounts (email) (outside a" in out
    assert (
        "ok   bookkeeping: the format's bookkeeping (queueguard_sqldir_ledger) reads head 2" in out
    )
    assert "ok   fresh: fresh.sql (2 statements) gives the upgraded catalog" in out
    assert out.rstrip().splitlines()[-1].startswith("every check passed")


# --- failures --------------------------------------------------------------------------------
def test_a_fresh_script_without_a_column_fails_naming_it(
    pg_admin_dsn: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fresh = tmp_path / "schema.sql"
    fresh.write_text(FRESH.read_text().replace("  born DATE,\n", ""))
    code, doc = _run(
        capsys, "--migrations", str(TEMPORAL), "--dsn", pg_admin_dsn, "--fresh", str(fresh)
    )
    assert code == 1 and not doc["ok"]
    found = _checks(doc)
    assert found["chain"]["ok"] and found["rerun"]["ok"] and not found["fresh"]["ok"]
    assert found["fresh"]["problems"] == ["column dogs.born: upgraded date; fresh (none)"]


def test_a_statement_that_errors_fails_naming_its_revision_and_statement(
    pg_admin_dsn: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = _copy(tmp_path, TEMPORAL)
    visits = folder / "v1.9" / "vet_visits.sql"
    visits.write_text(visits.read_text() + "\nALTER TABLE nowhere ADD COLUMN x int;\n")
    code = main(["verify", "--migrations", str(folder), "--dsn", pg_admin_dsn])
    out = capsys.readouterr().out
    assert code == 1
    assert "FAIL chain: revision 1.9 did not apply" in out
    assert 'revision 1.9 failed at statement 2 (relation "nowhere" does not exist)' in out
    assert "ALTER TABLE nowhere ADD COLUMN x int" in out
    assert "rerun" not in out and "VERIFY FAILED (1 of 1 checks)" in out


def test_a_revision_that_loses_a_row_fails_the_invariant_that_sees_it(
    pg_admin_dsn: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = _copy(tmp_path, TEMPORAL)
    totals = folder / "v1.10" / "walk_totals.sql"
    totals.write_text(
        totals.read_text()
        + "\nDO $$ BEGIN DELETE FROM walks WHERE kennel_id = 1 AND dog_id = 2; END; $$;\n"
    )
    fixtures = tmp_path / "fixtures"
    fixtures.mkdir()
    shutil.copy(FIXTURES / FIXTURE, fixtures)
    shutil.copy(FIXTURES / FIXTURE, fixtures / "1.0--misnamed.sql")  # it is at 0.2
    code, doc = _run(
        capsys,
        "--migrations", str(folder), "--dsn", pg_admin_dsn,
        "--fixtures", str(fixtures), "--invariants", str(INVARIANTS),
    )  # fmt: skip
    assert code == 1
    found = _checks(doc)
    assert found[f"fixture {FIXTURE}"]["ok"]
    assert found[f"invariant dogs_per_kennel on {FIXTURE}"]["ok"]
    lost = found[f"invariant walked_minutes_per_dog on {FIXTURE}"]
    assert not lost["ok"] and lost["detail"] == "1 row(s) only before, 1 only after the upgrade"
    assert lost["problems"] == [
        "only before: (1, 2, 'Bella', 20)",
        "only after: (1, 2, 'Bella', 0)",
    ]
    misnamed = found["fixture 1.0--misnamed.sql"]
    assert not misnamed["ok"]
    assert misnamed["detail"] == (
        "is at 0.2 by schema_update_history, schema_version, but its name says 1.0"
    )


def test_bad_input_exits_2_before_any_database(
    pg_admin_dsn: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = ["verify", "--migrations", str(TEMPORAL), "--dsn", pg_admin_dsn]
    assert main([*base, "--invariants", str(INVARIANTS)]) == 2  # no fixtures to run them on
    assert main([*base, "--fresh", str(tmp_path / "missing.sql")]) == 2
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "2.0--later.sql").write_text("")
    assert main([*base, "--fixtures", str(bad)]) == 2
    assert main(["verify", "--fresh", str(FRESH), "--dsn", pg_admin_dsn]) == 2  # our own set
    err = capsys.readouterr().err
    assert "revision '2.0' is not one of" in err
    assert "--invariants are run on --fixtures" in err


def test_the_committed_fixture_is_what_make_fixtures_writes(pg_admin_dsn: str) -> None:
    assert make_fixtures.dump(FIXTURE, pg_admin_dsn) == (FIXTURES / FIXTURE).read_text()


# --- the pure half ---------------------------------------------------------------------------
def test_fixture_names() -> None:
    mset = sets.load(TEMPORAL)
    assert checks.fixture_files(FIXTURES, mset) == [
        checks.FixtureFile(FIXTURES / FIXTURE, "0.2", "two-kennels", "sql")
    ]


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("two-kennels.sql", "named <revision>--<name>.sql"),
        ("0.3--x.dump", "revision '0.3' is not one of"),
        ("0.2--.sql", "named <revision>--<name>.sql"),
    ],
)
def test_fixture_names_refused(tmp_path: Path, name: str, message: str) -> None:
    (tmp_path / name).write_text("")
    (tmp_path / "README.md").write_text("not a fixture: ignored")
    with pytest.raises(UsageError, match=message):
        checks.fixture_files(tmp_path, sets.load(TEMPORAL))


def test_invariants_file() -> None:
    found = checks.parse_invariants(INVARIANTS.read_text(), "invariants.sql")
    assert list(found) == ["dogs_per_kennel", "walked_minutes_per_dog"]
    assert not found["dogs_per_kennel"].endswith(";")
    with pytest.raises(UsageError, match="duplicate"):
        checks.parse_invariants("-- name: a\nSELECT 1;\n-- name: a\nSELECT 2;", "f")
    with pytest.raises(UsageError, match="no `-- name: NAME` block"):
        checks.parse_invariants("SELECT 1;", "f")
    with pytest.raises(UsageError, match="has no query"):
        checks.parse_invariants("-- name: a\n;", "f")


def test_rows_compare_as_multisets() -> None:
    before = [(1, "a"), (1, "a"), (2, ["x"]), (3, {"k": 1})]
    after = [(1, "a"), (2, ["x"]), (3, {"k": 1}), (4, "b")]
    assert checks.multiset_diff(before, after) == ([(1, "a")], [(4, "b")])
    assert checks.multiset_diff([(1,), (2,)], [(2,), (1,)]) == ([], [])
    shown = checks.rows_problems([(n,) for n in range(7)], [], limit=2)
    assert shown == ["only before: (0)", "only before: (1)", "only before: … 5 more row(s)"]
    row = checks.row_text((None, True, "it's", 2.5, ("x",)))
    assert row == "(NULL, true, 'it''s', 2.5, [\"x\"])"


def _catalog(**parts: Any) -> catalog.Catalog:
    empty: dict[str, Any] = {
        "tables": {}, "columns": {}, "constraints": {}, "indexes": {}, "triggers": {},
        "functions": {}, "sequences": {}, "views": {}, "types": {},
    }  # fmt: skip
    return catalog.Catalog(**{**empty, **parts})


def test_catalog_differences_name_each_object_and_both_sides() -> None:
    int_col, text_col = catalog.Column("integer", False), catalog.Column("text", True)
    a = _catalog(
        tables={"t": "table", "gone": "table", "schema_version": "table"},
        columns={"t": {"a": int_col, "b": text_col}, "gone": {"x": int_col}},
        indexes={"t": frozenset({"CREATE INDEX ON public.t USING btree (a)"})},
        functions={"f()": "CREATE FUNCTION f()\n BEGIN\n  RETURN 1;\n END"},
        column_order={"t": ("a", "b")},
    )
    b = _catalog(
        tables={"t": "table"},
        columns={"t": {"a": catalog.Column("bigint", False), "b": text_col}},
        functions={"f()": "CREATE FUNCTION f()\n BEGIN\n  RETURN 2;\n END"},
        column_order={"t": ("b", "a")},
    )
    assert catalog.differences(
        catalog.without(a, {"schema_version"}.__contains__), b, ("up", "fresh")
    ) == [
        "table gone: up table; fresh (none)",
        "column t.a: up integer NOT NULL; fresh bigint NOT NULL",
        "index on t: up CREATE INDEX ON public.t USING btree (a); fresh (none)",
        "function f(): up line 3: RETURN 1;; fresh line 3: RETURN 2;",
    ]
    assert catalog.notes(a, b, ("up", "fresh")) == ["column order of t: up a, b; fresh b, a"]
    assert a != b and _catalog(column_order={"t": ("a",)}) == _catalog()  # order is no part
    assert "column_order" not in catalog.document(a)
    assert "~ columns t.a: integer NOT NULL != bigint NOT NULL" in catalog.diff(a, b)


APP = DATA / "alembic_app"
APP_EXTRA = DATA / "alembic_app_extra"


def test_a_chain_whose_first_tables_come_from_the_application(
    pg_admin_dsn: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Without --base it cannot start from empty: one line says so, and each fixture is
    still upgraded from its own revision and checked; with --base it verifies."""
    argv = ["verify", "--migrations", str(APP), "--dsn", pg_admin_dsn, "--json"]
    argv += ["--fixtures", str(APP_EXTRA / "fixtures")]
    assert main(argv) == 1
    doc = json.loads(capsys.readouterr().out)
    chain, fixture = doc["checks"]
    assert (chain["name"], chain["ok"], chain["problems"]) == ("chain", False, [])
    assert chain["detail"].startswith(
        'the chain cannot start from an empty database: revision m1 failed (relation "runs" '
        "does not exist)"
    )
    assert chain["detail"].endswith("give them with --base FILE")
    assert (fixture["name"], fixture["ok"], fixture["subject"]) == (
        "fixture",
        True,
        "m1--one-run.sql",
    )
    assert "upgraded to m2 (applied m2)" in fixture["detail"]

    assert main([*argv, "--base", str(APP_EXTRA / "base.sql")]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [c["name"] for c in doc["checks"]] == ["chain", "rerun", "bookkeeping", "fixture"]
    assert "the --base schema to m1…m2" in doc["checks"][0]["detail"]
    assert main([*argv, "--base", str(APP_EXTRA / "missing.sql")]) == 2


def test_a_fresh_pg_dump_is_read_and_printing_alone_is_no_difference(
    pg_admin_dsn: str, make_db: Callable[..., str], tmp_path: Path
) -> None:
    """A fresh schema that is a `pg_dump -s` (PostgreSQL 17.6 and 18 write `\\restrict`
    lines around it): its objects came from the dump's text, the chain's from the
    migrations'. PostgreSQL prints `varchar IN (...)` differently once it went through a
    dump and a reload — that alone is not a difference; a real one still is."""
    root = tmp_path / "shop"
    root.mkdir()
    (root / "001_orders.sql").write_text(
        "CREATE TABLE orders (id bigint PRIMARY KEY, status varchar(20) NOT NULL,\n"
        "  CONSTRAINT orders_status CHECK (status IN ('new', 'paid')));\n"
        "CREATE INDEX orders_open ON orders (id) WHERE status IN ('new', 'paid');\n"
    )
    mset = sets.load(root)
    installed = make_db()
    assert main(["upgrade", "--migrations", str(root), "--dsn", installed]) == 0
    dumped = tools.run("pg_dump", installed, ["--schema-only", "--no-owner"])
    fresh = tmp_path / "schema.sql"
    text = dumped.stdout.decode()
    if "\\restrict" not in text:  # an older pg_dump: the lines as 18's writes them
        text = f"\\restrict abc123\n{text}\n\\unrestrict abc123\n"
    fresh.write_text(text)
    report = verify(mset, pg_admin_dsn, fresh=fresh)
    (check,) = [c for c in report.checks if c.name == "fresh"]
    assert check.ok, check.problems
    assert any("differ only as PostgreSQL prints them" in n for n in check.notes)
    fresh.write_text(text.replace("status character varying(20) NOT NULL", "status text NOT NULL"))
    (check,) = [c for c in verify(mset, pg_admin_dsn, fresh=fresh).checks if c.name == "fresh"]
    assert not check.ok and any("orders.status" in p for p in check.problems)
