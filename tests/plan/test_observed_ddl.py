"""What `plan` observes for each kind of DDL, pinned against the server it runs on (the
embedded PostgreSQL 18, and Debian's 15 in CI's second run): the locks as pg_locks names
them, rewrites, validation scans and which statements must run outside a transaction —
including the ones that look dangerous and are not.

One plan of a plain SQL directory, one file per kind, on a target with rows in every table;
each case reads its statement's line from that one run.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from queueguard import sets
from queueguard.engine.plan import safer
from queueguard.engine.plan.planner import Plan, plan

AEL, SL, SUEL, SREL, REL = (
    "AccessExclusiveLock",
    "ShareLock",
    "ShareUpdateExclusiveLock",
    "ShareRowExclusiveLock",
    "RowExclusiveLock",
)
TARGET = """
CREATE TABLE parent (id int PRIMARY KEY, name varchar(50) NOT NULL, n int, note text);
CREATE TABLE child (id bigint PRIMARY KEY, parent_id int, v int, label varchar(20));
CREATE INDEX child_v ON child (v);
INSERT INTO parent SELECT g, 'p' || g, g, NULL FROM generate_series(1, 2000) g;
INSERT INTO child SELECT g, 1 + g % 2000, g % 7, 'c' FROM generate_series(1, 5000) g;
ALTER TABLE parent ADD CONSTRAINT n_present CHECK (n IS NOT NULL);
CREATE TABLE tag (id int NOT NULL, name text);
INSERT INTO tag SELECT g, 't' || g FROM generate_series(1, 1000) g;
CREATE TABLE word (id int PRIMARY KEY, w text);
CREATE INDEX word_w ON word (w);
INSERT INTO word SELECT g, md5(g::text) FROM generate_series(1, 3000) g;
"""

#: (file, statement, transactional, {relation: mode}, rewrites, scans): one kind per file
KINDS: list[tuple[str, str, bool, dict[str, str], list[str], list[str]]] = [
    ("001_add_nullable.sql", "ALTER TABLE child ADD COLUMN a int", True, {"child": AEL}, [], []),
    # looks dangerous, is not: a constant default is stored in the catalog (PostgreSQL 11+)
    (
        "002_add_constant_default.sql",
        "ALTER TABLE child ADD COLUMN b int NOT NULL DEFAULT 7",
        True,
        {"child": AEL},
        [],
        [],
    ),
    (
        "003_add_volatile_default.sql",
        "ALTER TABLE child ADD COLUMN c float8 DEFAULT random()",
        True,
        {"child": AEL},
        ["child"],
        [],
    ),
    # Temporal's 57-minute statement (temporalio/temporal#10358): a STORED expression rewrites
    (
        "004_add_stored_generated.sql",
        "ALTER TABLE child ADD COLUMN v2 int GENERATED ALWAYS AS (v * 2) STORED",
        True,
        {"child": AEL},
        ["child"],
        [],
    ),
    # looks dangerous, is not: widening a varchar changes only the catalog
    (
        "005_widen_varchar.sql",
        "ALTER TABLE parent ALTER COLUMN name TYPE varchar(200)",
        True,
        {"parent": AEL},
        [],
        [],
    ),
    (
        "006_varchar_to_text.sql",
        "ALTER TABLE child ALTER COLUMN label TYPE text",
        True,
        {"child": AEL},
        [],
        [],
    ),
    (
        "007_int_to_bigint.sql",
        "ALTER TABLE child ALTER COLUMN parent_id TYPE bigint",
        True,
        {"child": AEL},
        ["child"],
        [],
    ),
    (
        "008_set_not_null_scans.sql",
        "ALTER TABLE child ALTER COLUMN parent_id SET NOT NULL",
        True,
        {"child": AEL},
        [],
        ["child"],
    ),
    # looks dangerous, is not: a valid CHECK (n IS NOT NULL) proves it (PostgreSQL 12+)
    (
        "009_set_not_null_proven.sql",
        "ALTER TABLE parent ALTER COLUMN n SET NOT NULL",
        True,
        {"parent": AEL},
        [],
        [],
    ),
    (
        "010_check_validates.sql",
        "ALTER TABLE child ADD CONSTRAINT v_small CHECK (v < 100)",
        True,
        {"child": AEL},
        [],
        ["child"],
    ),
    (
        "011_check_not_valid.sql",
        "ALTER TABLE child ADD CONSTRAINT id_positive CHECK (id > 0) NOT VALID",
        True,
        {"child": AEL},
        [],
        [],
    ),
    (
        "012_validate.sql",
        "ALTER TABLE child VALIDATE CONSTRAINT id_positive",
        True,
        {"child": SUEL},
        [],
        ["child"],
    ),
    (
        "013_foreign_key.sql",
        "ALTER TABLE child ADD CONSTRAINT child_parent FOREIGN KEY (parent_id) REFERENCES parent",
        True,
        {"child": SREL, "parent": SREL},
        [],
        ["child", "parent"],
    ),
    (
        "014_create_index.sql",
        "CREATE INDEX child_label ON child (label)",
        True,
        {"child": SL},
        [],
        ["child"],
    ),
    (
        "015_create_index_concurrently.sql",
        "CREATE INDEX CONCURRENTLY child_parent_i ON child (parent_id)",
        False,
        {"child": SUEL},
        [],
        ["child"],
    ),
    # (the index itself goes under a brief ACCESS EXCLUSIVE at the end, which sampling may see)
    (
        "016_drop_index_concurrently.sql",
        "DROP INDEX CONCURRENTLY child_label",
        False,
        {"child": SUEL},
        [],
        [],
    ),
    # (a plain VACUUM may also take ACCESS EXCLUSIVE, conditionally, to truncate empty pages)
    ("017_vacuum.sql", "VACUUM (TRUNCATE false) child", False, {"child": SUEL}, [], ["child"]),
    (
        "018_set_default.sql",
        "ALTER TABLE child ALTER COLUMN a SET DEFAULT 0",
        True,
        {"child": AEL},
        [],
        [],
    ),
    (
        "019_rename.sql",
        "ALTER TABLE parent RENAME COLUMN note TO remark",
        True,
        {"parent": AEL},
        [],
        [],
    ),
    (
        "020_backfill.sql",
        "UPDATE child SET a = 1 WHERE a IS NULL",
        True,
        {"child": REL},
        [],
        ["child"],
    ),
    (
        "021_storage_param.sql",
        "ALTER TABLE child SET (fillfactor = 90)",
        True,
        {"child": SUEL},
        [],
        [],
    ),
    (
        "022_trigger.sql",
        "CREATE TRIGGER child_touch BEFORE UPDATE ON child FOR EACH ROW "
        "EXECUTE FUNCTION suppress_redundant_updates_trigger()",
        True,
        {"child": SREL},
        [],
        [],
    ),
    ("023_drop_column.sql", "ALTER TABLE child DROP COLUMN c", True, {"child": AEL}, [], []),
    (
        "024_new_table.sql",
        "CREATE TABLE audit (id int PRIMARY KEY, at timestamptz)",
        True,
        {},
        [],
        [],
    ),
    # a constraint that builds its index: not a new column, whatever its text's ADD says
    (
        "025_add_unique.sql",
        "ALTER TABLE child ADD CONSTRAINT child_id_v UNIQUE (id, v)",
        True,
        {"child": AEL},
        [],
        ["child"],
    ),
    (
        "026_add_primary_key.sql",
        "ALTER TABLE tag ADD PRIMARY KEY (id)",
        True,
        {"tag": AEL},
        [],
        ["tag"],
    ),
    # an index rebuilt while its table keeps its file: the index is the rewrite
    (
        "027_reindex.sql",
        "REINDEX INDEX child_v",
        True,
        {"child": SL, "child_v": AEL},
        ["child_v"],
        ["child"],
    ),
    # an indexed column's collation changed: the table keeps its file, the index is built
    # again (under a new file and OID: PostgreSQL drops and re-creates it)
    (
        "028_indexed_collation.sql",
        'ALTER TABLE word ALTER COLUMN w TYPE text COLLATE "C"',
        True,
        {"word": AEL},
        [],
        ["word"],
    ),
]

#: the `safer:` advice each kind gets (plan.safer, from PostgreSQL's parse): none for a
#: statement that blocks no one or only changes the catalog
SAFER = {
    "003": safer.NEW_COLUMN,
    "004": safer.STORED_COLUMN,
    "007": safer.TYPE_CHANGE,
    "008": safer.NOT_NULL,
    "010": safer.NOT_VALID,
    "013": safer.NOT_VALID,
    "014": safer.CONCURRENT_INDEX,
    "025": safer.UNIQUE,
    "026": safer.PRIMARY_KEY,
}


@pytest.fixture(scope="module")
def observed(tmp_path_factory: pytest.TempPathFactory, pg_admin_dsn: str) -> Iterator[Plan]:
    from queueguard.pg import scratch

    folder: Path = tmp_path_factory.mktemp("ddl")
    for name, statement, *_ in KINDS:
        (folder / name).write_text(statement + ";\n")
    with scratch.ScratchDatabases(pg_admin_dsn, prefix="qgddl") as databases:
        target = databases.create()
        with psycopg.connect(target, autocommit=True) as conn:
            conn.execute(TARGET)  # type: ignore[arg-type]
            conn.execute("ANALYZE")
        yield plan(sets.load(folder, "sqldir"), target, scratch_admin=pg_admin_dsn, sample_rows=500)


def _last(result: Plan, revision: str) -> dict[str, Any]:
    from queueguard.engine.plan.bill import document

    lines = dict(result.revisions)[revision]
    return document(lines[-1])


@pytest.mark.parametrize(
    ("name", "statement", "transactional", "locks", "rewrites", "scans"), KINDS
)
def test_each_kind_of_ddl_is_observed_as_postgresql_runs_it(
    observed: Plan,
    name: str,
    statement: str,
    transactional: bool,
    locks: dict[str, str],
    rewrites: list[str],
    scans: list[str],
) -> None:
    line = _last(observed, name.split("_")[0])
    seen = {lock["relation"]: lock["mode"] for lock in line["locks"]}
    if not transactional:
        # outside a transaction the table lock is seen where it waits; later, shorter locks
        # are sampled while it runs and may come and go unseen
        seen = {rel: mode for rel, mode in seen.items() if rel in locks}
    assert (line["transactional"], seen, line["rewrites"], line["scans"]) == (
        transactional,
        locks,
        rewrites,
        scans,
    ), line


@pytest.mark.parametrize("name", [k[0] for k in KINDS])
def test_each_kind_of_ddl_gets_the_right_safer_form_or_none(observed: Plan, name: str) -> None:
    revision = name.split("_")[0]
    assert _last(observed, revision)["safer"] == SAFER.get(revision)


@pytest.mark.parametrize(
    ("revision", "table", "rows"), [("027", "child", 5000), ("028", "word", 3000)]
)
def test_an_index_rebuilt_while_its_table_keeps_its_file_is_priced_at_the_targets_size(
    observed: Plan, revision: str, table: str, rows: int
) -> None:
    """REINDEX and a collation change rebuild an index, not its table: the bill prices an
    index build on that table (a sort) scaled from the sample to the target's rows, not a
    scan and not a rewrite of the table."""
    line = _last(observed, revision)
    assert table not in line["rewrites"]
    assert line["basis"].startswith(f"indexes {table}: "), line["basis"]
    assert f"(target {rows} rows" in line["basis"] and "n·log n for the sort" in line["basis"]
    assert line["estimate_ms"] > 0


def test_every_revision_is_planned_in_order_with_a_sample(observed: Plan) -> None:
    assert observed.current is None and observed.target == "028"
    assert [rid for rid, _ in observed.revisions] == [k[0].split("_")[0] for k in KINDS]
    doc = observed.document()
    assert doc["schemaVersion"] == 1 and doc["format"] == "sqldir" and doc["sampleRows"] == 500


def _traced_rewrite(admin_dsn: str, statements: list[str]) -> tuple[list[Any], Any, Any]:
    """`apply.traced` on ten rows of `t` (c int) beside a sequence `s`: what it saw, the
    sequence's last value and max(c) after it."""
    from queueguard.engine.plan import apply
    from queueguard.pg import scratch

    with scratch.ScratchDatabases(admin_dsn, prefix="qgrep") as databases:
        dsn = databases.create()
        with psycopg.connect(dsn) as conn:
            conn.execute("CREATE SEQUENCE s; CREATE TABLE t (c int);"
                         "INSERT INTO t SELECT g FROM generate_series(1, 10) g")  # fmt: skip
            conn.commit()
            seen = apply.traced(conn, dsn, statements)
            last = conn.execute("SELECT last_value FROM s").fetchone()
            top = conn.execute("SELECT max(c) FROM t").fetchone()
    return seen, last, top


def test_a_rewrite_is_timed_as_the_median_of_several_runs_the_last_one_kept(
    pg_admin_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A statement that rewrote a table is run REPEATS times (rolled back but the last), so
    one run's swing does not make the bill: the sequence its USING draws from (not rolled
    back) shows every run, the table holds the last run's values."""
    from queueguard.engine.plan import apply

    monkeypatch.setattr(apply, "REPEAT_ABOVE_S", 0.0)
    seen, last, top = _traced_rewrite(pg_admin_dsn, [
        "ALTER TABLE t ALTER COLUMN c TYPE bigint USING c + nextval('s')",
        "ALTER TABLE t ADD COLUMN d int",  # no rewrite: run once
    ])  # fmt: skip
    assert seen[0].rewrites == ["t"] and not seen[1].rewrites
    assert last == (10 * apply.REPEATS,)
    assert top == (10 + 10 * apply.REPEATS,)


def test_a_long_rewrite_runs_once(pg_admin_dsn: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A rewrite at or over REPEAT_BELOW_S on the sample is not repeated: its one run spans
    the swings a median smooths, and repeating it multiplies plan's longest step."""
    from queueguard.engine.plan import apply

    monkeypatch.setattr(apply, "REPEAT_ABOVE_S", 0.0)
    monkeypatch.setattr(apply, "REPEAT_BELOW_S", 0.0)
    seen, last, _ = _traced_rewrite(
        pg_admin_dsn, ["ALTER TABLE t ALTER COLUMN c TYPE bigint USING c + nextval('s')"]
    )
    assert seen[0].rewrites == ["t"]
    assert last == (10,)
