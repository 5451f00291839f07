"""`queueguard lint` on a migration set of another format: squawk's rules, one finding per
statement.

A plain SQL directory written here (statements across lines, two on one line, a leading
comment) and the Temporal set of tests/sets/data; with the embedded server, `--dsn` replaces
squawk's guess by what PostgreSQL did on a copy of the target.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from queueguard import sets
from queueguard.cli import main
from queueguard.errors import UsageError
from queueguard.lint.model import Finding
from queueguard.lint.sets import detect_set, lint_set, rank
from queueguard.lint.sets.statements import containing, locate, server_text

TEMPORAL = Path(__file__).resolve().parents[1] / "sets" / "data" / "temporal"

TABLES = """-- two tables
CREATE TABLE parent (id bigint PRIMARY KEY, name text NOT NULL);
CREATE TABLE child (
  id bigint PRIMARY KEY,
  parent_id bigint,
  label varchar(20)
);
"""
CHANGE = """ALTER TABLE child ALTER COLUMN label TYPE varchar(200);
ALTER TABLE child ADD CONSTRAINT child_parent FOREIGN KEY (parent_id) REFERENCES parent (id);
CREATE INDEX child_label ON child (label); ALTER TABLE child ADD COLUMN c float8 DEFAULT random();
"""


@pytest.fixture
def sqldir(tmp_path: Path) -> Path:
    root = tmp_path / "schema"
    root.mkdir()
    (root / "001_tables.sql").write_text(TABLES)
    (root / "002_change.sql").write_text(CHANGE)
    return root


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["lint", *argv])
    out, err = capsys.readouterr()
    return code, out, err


# one finding per statement, ranked -------------------------------------------------------------
def test_one_finding_per_statement_the_worst_by_tier(sqldir: Path) -> None:
    report = lint_set(sets.load(sqldir))
    got = [(s.revision, s.index, s.code, s.tier.label, len(s.suppressed)) for s in report.flagged]
    assert got == [
        ("001", 1, "squawk.prefer-text-field", "advisory", 0),
        # a rewrite outranks the timeouts and the style rule squawk also reports on it
        ("002", 0, "squawk.changing-column-type", "rewrite", 3),
        # same tier: the more specific rule wins
        ("002", 1, "squawk.adding-foreign-key-constraint", "scan", 1),
        ("002", 2, "squawk.require-concurrent-index-creation", "build", 0),
        ("002", 3, "squawk.adding-field-with-default", "rewrite", 0),
    ]
    assert len({(s.revision, s.index) for s in report.flagged}) == len(report.flagged)
    assert not report.ok


def test_each_finding_is_placed_on_the_statement_holding_it(sqldir: Path) -> None:
    report = lint_set(sets.load(sqldir))
    places = [(s.path.name, s.line, s.column) for s in report.flagged]
    assert places == [
        ("001_tables.sql", 3, 1),  # the varchar is on line 6: the statement starts on 3
        ("002_change.sql", 1, 1),
        ("002_change.sql", 2, 1),
        ("002_change.sql", 3, 1),
        ("002_change.sql", 3, 44),  # the second statement of line 3
    ]
    varchar = report.flagged[0].findings[0]
    assert (varchar.line, report.flagged[0].line) == (6, 3)


def test_the_text_names_the_statement_the_rule_and_the_lock(
    capsys: pytest.CaptureFixture[str], sqldir: Path
) -> None:
    code, out, err = _run(capsys, "--migrations", str(sqldir))
    lines = out.splitlines()
    assert code == 1 and len(lines) == 5
    assert lines[1].endswith(
        "002_change.sql:1: rewrite squawk.changing-column-type: ACCESS EXCLUSIVE on child "
        "while every row is rewritten and every index rebuilt (unless the new type is "
        "binary-compatible, e.g. a wider varchar) (+3 more on this statement: "
        "require-lock-timeout, require-statement-timeout, prefer-text-field)"
    )
    assert "SHARE ROW EXCLUSIVE on child and parent while every row is checked" in lines[2]
    assert "002_change.sql:3:44: rewrite squawk.adding-field-with-default" in lines[4]
    assert "5 statement(s) flagged (2 rewrite, 1 build, 1 scan, 1 advisory)" in err
    assert "9 squawk finding(s) in all" in err


def test_the_json_keeps_every_squawk_finding_and_marks_the_chosen_ones(
    capsys: pytest.CaptureFixture[str], sqldir: Path
) -> None:
    code, out, _ = _run(capsys, "--migrations", str(sqldir), "--json")
    doc = json.loads(out)
    assert code == 1 and doc["format"] == "sqldir" and doc["observed"] is False
    findings, statements = doc["findings"], doc["statements"]
    assert len(findings) == 9
    chosen = [f for f in findings if f["chosen"]]
    assert len(chosen) == len(statements) == 5
    per_statement = Counter((f["revision"], f["statement"]) for f in findings)
    for s in statements:
        assert per_statement[(s["revision"], s["index"])] == s["suppressed"] + 1
        (mine,) = [
            f for f in chosen if (f["revision"], f["statement"]) == (s["revision"], s["index"])
        ]
        assert mine["code"] == s["code"]
    assert {f["code"] for f in findings if not f["chosen"]} == {
        "squawk.require-lock-timeout",
        "squawk.require-statement-timeout",
        "squawk.prefer-text-field",
        "squawk.constraint-missing-not-valid",
    }


def test_a_temporal_set_reads_only_the_listed_files(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _run(capsys, str(TEMPORAL))  # detected: `lint DIR` on a set of another format
    assert code == 1
    assert "draft_not_listed.sql" not in out  # not in its manifest: never applied
    got = [line.split(": ")[0:2] for line in out.splitlines()]
    assert [(w.split("temporal/")[1], what) for w, what in got] == [
        ("v0.1/base.sql:2", "advisory squawk.prefer-text-field"),
        ("v0.1/base.sql:8", "advisory squawk.prefer-text-field"),
        ("v0.2/walks.sql:1", "advisory squawk.prefer-bigint-over-int"),
        ("v0.2/indexes.sql:1", "build squawk.require-concurrent-index-creation"),
        ("v1.10/walk_totals.sql:1", "advisory squawk.require-lock-timeout"),
    ]
    assert "SHARE on walks while the index is built: writes wait (+2 more" in out
    assert "(temporal set temporal)" in err


def test_an_alembic_set_is_linted_as_alembic_renders_it(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Each revision's `alembic upgrade --sql` rendering, named by its .py file; the data
    migration that reads rows cannot render offline and is counted, not linted."""
    code, out, err = _run(capsys, str(TEMPORAL.parent / "alembic_plain"))
    got = [line.split(": ")[0:2] for line in out.splitlines()]
    assert [(w.split("versions/")[1], what) for w, what in got] == [
        ("1a0c5e7f2b01_create_item.py:1", "advisory squawk.prefer-bigint-over-int"),
        ("3c2e70914d03_index_label.py:1", "advisory squawk.require-lock-timeout"),
    ]
    assert "1 Python revision(s) not linted: they cannot be rendered as SQL offline" in err
    assert code == 1


def test_our_own_set_and_plain_folders_keep_the_gate(tmp_path: Path) -> None:
    from queueguard.resources import migrations_dir

    assert detect_set(migrations_dir()) is None  # queueguard's own: lint.lint as before
    (tmp_path / "draft.sql").write_text("SELECT 1;\n")  # no version in the name
    assert detect_set(tmp_path) is None
    (tmp_path / "audit_queries").mkdir()
    (tmp_path / "audit_queries" / "01_q.sql").write_text("SELECT 1;\n")
    assert detect_set(tmp_path / "audit_queries") is None


def test_dsn_is_refused_for_our_own_set(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["lint", "--dsn", "postgresql://localhost/x"]) == 2
    assert "set of another format" in capsys.readouterr().err


# the pure parts --------------------------------------------------------------------------------
def test_statements_are_located_as_postgresql_reads_them() -> None:
    text = "-- c\nCREATE TABLE a (x int);\n\n/* b */ SELECT ';'; SELECT 2;\nSELECT\n  3"
    located = locate(text)
    assert [(s.line, s.start, s.column) for s in located] == [
        (2, (2, 1), 1),
        (4, (4, 1), 1),
        (4, (4, 21), 21),
        (5, (5, 1), 1),
    ]
    assert containing(located, 1, 1) is located[0]  # before the first: the first
    assert containing(located, 4, 15) is located[1]
    assert containing(located, 4, 23) is located[2]
    assert containing(located, 6, 3) is located[3]
    assert containing([], 1, 1) is None


def _finding(rule: str, line: int = 1) -> Finding:
    return Finding(f"squawk.{rule}", Path("x.sql"), line, 1, "m", "h", "squawk")


def test_the_ranking() -> None:
    order = [
        "require-lock-timeout",
        "some-future-rule",
        "require-concurrent-index-deletion",
        "renaming-column",
        "adding-required-field",
        "constraint-missing-not-valid",
        "require-concurrent-index-creation",
        "changing-column-type",
    ]
    tiers = [rank.tier_of(_finding(r)) for r in order]
    assert tiers == sorted(tiers) and len(set(tiers)) == len(tiers)
    for worse, better in zip(order[1:], order, strict=False):
        assert rank.choose([_finding(better), _finding(worse)]).code == f"squawk.{worse}"
    both = [_finding("constraint-missing-not-valid"), _finding("adding-foreign-key-constraint")]
    assert rank.choose(both).code == "squawk.adding-foreign-key-constraint"
    style = [_finding("prefer-robust-stmts"), _finding("require-lock-timeout", 2)]
    assert rank.choose(style).code == "squawk.require-lock-timeout"  # the lock-related one
    twice = [_finding("prefer-text-field", 3), _finding("prefer-text-field", 2)]
    assert rank.choose(twice).line == 2


def test_the_cost_names_the_table() -> None:
    assert rank.table_of('ALTER TABLE IF EXISTS ONLY public."Child" ADD x int') == (
        'public."Child"'
    )
    assert rank.table_of("CREATE UNIQUE INDEX IF NOT EXISTS i ON ONLY t (a)") == "t"
    assert rank.table_of("SELECT 1") is None
    fk = "ALTER TABLE c ADD CONSTRAINT f FOREIGN KEY (p) REFERENCES p (id)"
    assert rank.static_cost(_finding("adding-foreign-key-constraint"), fk).startswith(
        "SHARE ROW EXCLUSIVE on c and p "
    )
    assert rank.static_cost(_finding("some-future-rule"), fk) == "m"


# --dsn: observed on a copy of the target ------------------------------------------------------
TARGET = """
CREATE TABLE child (id bigint PRIMARY KEY, v bigint, label varchar(20));
INSERT INTO child SELECT g, g % 7, 'c' FROM generate_series(1, 3000) g;
"""
OBSERVED_SET = {
    # looks like it might rewrite, does not: a constant default lives in the catalog
    "001_add_constant_default.sql": "ALTER TABLE child ADD COLUMN b int NOT NULL DEFAULT 7;\n",
    # squawk's changing-column-type; widening a varchar is catalog-only
    "002_widen_varchar.sql": "ALTER TABLE child ALTER COLUMN label TYPE varchar(200);\n",
    "003_volatile_default.sql": "ALTER TABLE child ADD COLUMN c float8 DEFAULT random();\n",
    "004_index.sql": "CREATE INDEX child_v ON child (v);\n",
    # nothing squawk flags, but every row is rewritten: the trace adds it
    "005_set_logged.sql": "ALTER TABLE child SET UNLOGGED;\n",
}


@pytest.fixture(scope="module")
def target(
    tmp_path_factory: pytest.TempPathFactory, pg_admin_dsn: str
) -> Iterator[tuple[Path, str]]:
    from queueguard.pg import scratch

    folder: Path = tmp_path_factory.mktemp("observed")
    for name, text in OBSERVED_SET.items():
        (folder / name).write_text(text)
    with scratch.ScratchDatabases(pg_admin_dsn, prefix="qglint") as databases:
        dsn = databases.create()
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(TARGET)  # type: ignore[arg-type]
            conn.execute("ANALYZE")
        yield folder, dsn


def test_without_a_database_the_guess_stands(target: tuple[Path, str]) -> None:
    report = lint_set(sets.load(target[0]))
    assert [(s.revision, s.code, s.tier.label) for s in report.flagged] == [
        ("001", "squawk.require-lock-timeout", "advisory"),
        ("002", "squawk.changing-column-type", "rewrite"),
        ("003", "squawk.adding-field-with-default", "rewrite"),
        ("004", "squawk.require-concurrent-index-creation", "build"),
        ("005", "squawk.require-lock-timeout", "advisory"),
    ]


def test_dsn_replaces_the_guess_by_the_observation(
    target: tuple[Path, str], pg_admin_dsn: str
) -> None:
    folder, dsn = target
    report = lint_set(sets.load(folder), dsn=dsn, scratch_admin=pg_admin_dsn)
    got = {s.revision: s for s in report.flagged}
    assert report.traced == ("001", "002", "003", "004", "005")
    # downgraded to notes: catalog-only, as PostgreSQL shows
    for rid in ("001", "002"):
        assert got[rid].tier is rank.Tier.NOTE and got[rid].severity == "note"
        assert "ACCESS EXCLUSIVE on child, catalog only (no rewrite, no scan)" in got[rid].cost
    assert got["001"].code == "squawk.require-lock-timeout"  # squawk's findings are kept
    assert len(got["001"].suppressed) == 2
    assert got["002"].guess is not None and got["002"].guess[0] is rank.Tier.REWRITE
    # confirmed, in observed terms
    assert got["003"].tier is rank.Tier.REWRITE
    assert got["003"].cost.startswith("observed: ACCESS EXCLUSIVE on child while every row of")
    assert got["004"].tier is rank.Tier.BUILD
    assert got["004"].cost.startswith("observed: SHARE on child while child_v is built")
    # raised: squawk saw only missing timeouts; the trace's rewrite leads, squawk's follow
    assert (got["005"].code, got["005"].tier) == ("plan.rewrite", rank.Tier.REWRITE)
    assert got["005"].chosen is None and len(got["005"].suppressed) == 2
    assert got["005"].observation is not None and got["005"].observation["rewrites"]
    assert not report.ok


def test_dsn_on_the_command_line(
    capsys: pytest.CaptureFixture[str], target: tuple[Path, str]
) -> None:
    folder, dsn = target
    code, out, err = _run(capsys, "--migrations", str(folder), "--dsn", dsn, "--json")
    doc = json.loads(out)
    assert code == 1 and doc["observed"] is True and doc["target_at"] is None
    first = doc["statements"][0]
    assert (first["severity"], first["tier"], first["suppressed"]) == ("note", "note", 2)
    assert first["observed"]["locks"] == [{"relation": "child", "mode": "AccessExclusiveLock"}]
    # every squawk finding: each statement's rest, plus its chosen one unless the trace leads
    leads = [s["code"].startswith("squawk.") for s in doc["statements"]]
    assert leads == [True, True, True, True, False]
    assert len(doc["findings"]) == sum(s["suppressed"] for s in doc["statements"]) + 4
    assert "pending revision(s) traced" in err


# an Alembic project whose env.py always connects (never renders offline, as many real ones):
# with --dsn, what its revisions ran on the copy is what is linted
ONLINE_ONLY_ENV = """
from alembic import context
from sqlalchemy import create_engine, pool

url = context.config.get_main_option("sqlalchemy.url")
with create_engine(url, poolclass=pool.NullPool).connect() as connection:
    context.configure(connection=connection)
    with context.begin_transaction():
        context.run_migrations()
"""
ONLINE_ONLY_REVISION = """
import sqlalchemy as sa
from alembic import op

revision = "b2"
down_revision = "a1"


def upgrade():
    op.create_index("ix_child_v", "child", ["v"])
    op.execute(sa.text("UPDATE child SET label = :label WHERE v = :v").bindparams(label="x", v=3))
    op.execute("CREATE INDEX ix_child_label ON child (label); ALTER TABLE child ADD COLUMN w int")
"""


def test_dsn_lints_what_an_online_only_alembic_env_ran(
    tmp_path: Path, target: tuple[Path, str], pg_admin_dsn: str
) -> None:
    """An env.py that cannot render offline left every revision unlinted; with --dsn, the
    statements the pending revisions sent on the copy are linted (a bound parameter written
    as PostgreSQL reads it, `$1`) and each carries its observation."""
    _, dsn = target
    root = tmp_path / "online_only"
    (root / "versions").mkdir(parents=True)
    (root / "env.py").write_text(ONLINE_ONLY_ENV)
    (root / "versions" / "a1_base.py").write_text(
        'revision = "a1"\ndown_revision = None\n\n\ndef upgrade():\n    pass\n'
    )
    (root / "versions" / "b2_index.py").write_text(ONLINE_ONLY_REVISION)
    with pytest.raises(UsageError, match="cannot learn the version table"):
        sets.load(root)  # offline, nothing can be learnt
    mset = sets.load(root, "alembic", dsn)
    report = lint_set(mset, dsn=dsn, scratch_admin=pg_admin_dsn)
    assert report.traced == ("a1", "b2") and report.python_revisions == ("a1",)
    got = {(s.revision, s.index): s for s in report.flagged}
    index = got[("b2", 0)]
    assert (index.code, index.tier) == ("squawk.require-concurrent-index-creation", rank.Tier.BUILD)
    assert index.cost.startswith("observed: SHARE on child while ix_child_v is built")
    # the UPDATE's placeholders parse as PostgreSQL's: no syntax error, nothing flagged
    assert ("b2", 1) not in got and all("syntax" not in s.code for s in report.flagged)
    # one execute of two statements: each linted, each with the observation of them both
    both = got[("b2", 2)]
    assert both.code == "squawk.require-concurrent-index-creation"
    # (the ALTER sent with it took ACCESS EXCLUSIVE: the trace cannot part them)
    assert both.cost.startswith("observed: ACCESS EXCLUSIVE on child while ix_child_label is")


def test_a_traced_statement_is_written_as_the_server_reads_it() -> None:
    assert server_text("UPDATE t SET a = %(a)s WHERE b = %(b)s AND c LIKE 'x%%' OR a = %(a)s") == (
        "UPDATE t SET a = $1 WHERE b = $2 AND c LIKE 'x%' OR a = $1"
    )
    assert server_text("INSERT INTO t VALUES (%s, %s)") == "INSERT INTO t VALUES ($1, $2)"
    assert server_text("SELECT 1") == "SELECT 1"


def test_a_missing_squawk_is_said_before_anything_is_traced(
    sqldir: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import queueguard.lint.sets as set_lint
    from queueguard.lint.squawk import SquawkUnavailable

    monkeypatch.setenv("QUEUEGUARD_SQUAWK", str(tmp_path / "no-squawk"))

    def traced(*_args: object) -> None:
        raise AssertionError("traced before squawk was found")

    monkeypatch.setattr(set_lint, "_observe", traced)
    with pytest.raises(SquawkUnavailable, match="no-squawk: no such file"):
        lint_set(sets.load(sqldir), dsn="dbname=unused")
