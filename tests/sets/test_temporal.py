"""sets.temporal on a small Temporal-format set written for these tests (data/temporal):

    v0.1   one file                      v1.9   one listed file + one the manifest omits
    v0.2   two files, listed z→a         v1.10  a DO block; proves 1.10 sorts after 1.9
    v1.0   no files, AllowNoCqlFiles

The bookkeeping tests compare what `setup` and `record` write with what temporal-sql-tool's
PostgreSQL plugin writes; each expectation names the Go function (upstream files
tools/common/schema/setuptask.go, updatetask.go and
common/persistence/sql/sqlplugin/postgresql/admin.go) it was derived from.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest

from queueguard.errors import UsageError, VersionKeyedElsewhere
from queueguard.sets import temporal
from queueguard.sets.model import MigrationSet

DATA = Path(__file__).parent / "data" / "temporal"


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """A writable copy of the set, for the error cases."""
    root = tmp_path / "versioned"
    shutil.copytree(DATA, root)
    return root


def write_manifest(folder: Path, **fields: Any) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "manifest.json").write_text(json.dumps(fields), encoding="utf-8")


# --- reading the folder ----------------------------------------------------------------------


def test_detects_the_versioned_folder_and_its_parent(tmp_path: Path, tree: Path) -> None:
    assert temporal.detect(DATA)
    assert temporal.detect(tree.parent)  # holds versioned/, like --schema-name's folder
    assert temporal.load(tree.parent).root == tree
    assert not temporal.detect(tmp_path / "missing")
    (tmp_path / "plain" / "v1.0").mkdir(parents=True)  # a version folder without a manifest
    assert not temporal.detect(tmp_path / "plain")


def test_versions_are_ordered_numerically() -> None:
    loaded = temporal.load(DATA)
    assert loaded.format == "temporal"
    assert loaded.ids == ("0.1", "0.2", "1.0", "1.9", "1.10")
    assert [r.down for r in loaded.revisions] == [None, "0.1", "0.2", "1.0", "1.9"]
    assert loaded.bookkeeping == {"schema_version", "schema_update_history"}
    key = loaded.order
    assert key is not None
    assert key("0.0") < key("0.1") < key("1.9") < key("1.10") < key("2.0")
    assert key("v1.10") == key("1.10") == key("1.10.0") == key("1.010")


def test_the_version_key_refuses_what_is_not_a_version() -> None:
    for bad in ("", "1.x", "1.2.3.4", "1.2-rc1", "v"):
        with pytest.raises(UsageError):
            temporal.version_key(bad)


def test_files_are_the_manifests_in_its_order() -> None:
    by_id = {r.id: r for r in temporal.load(DATA).revisions}
    assert by_id["0.2"].files == (Path("walks.sql"), Path("indexes.sql"))
    # v1.9 holds draft_not_listed.sql, which its manifest does not name: never read
    assert by_id["1.9"].files == (Path("vet_visits.sql"),)
    assert not any("DROP TABLE dogs" in s for s in by_id["1.9"].statements or ())
    assert by_id["1.0"].files == ()


def test_statements_follow_the_listed_files() -> None:
    by_id = {r.id: r for r in temporal.load(DATA).revisions}
    walks, index, alter = by_id["0.2"].statements or ()
    assert walks.startswith("CREATE TABLE walks")
    assert index.startswith("CREATE INDEX walks_started_at_idx")
    assert alter == "ALTER TABLE dogs ADD COLUMN born DATE"
    assert len(by_id["0.1"].statements or ()) == 2
    assert by_id["1.0"].statements == ()  # AllowNoCqlFiles: a version bump without SQL
    alter, block = by_id["1.10"].statements or ()
    assert block.startswith("DO $$") and block.endswith("$$")


def test_native_facts_and_the_manifest_md5() -> None:
    loaded = temporal.load(DATA)
    head = loaded.get("1.10")
    assert head.title == "walk totals, filled by a DO block"
    assert head.native["min_compatible_version"] == "1.9"
    assert head.native["description"] == head.title
    assert head.native["manifest"] == DATA / "v1.10" / "manifest.json"
    # readManifest: md5.Sum of the raw bytes it read, hex-encoded (not of re-encoded JSON)
    raw = (DATA / "v1.10" / "manifest.json").read_bytes()
    assert head.native["manifest_md5"] == hashlib.md5(raw).hexdigest()
    assert head.native["manifest_md5"] == "e972f1572be4cb2707109828864b8e86"
    # "v0.2" in the manifest is recorded as 0.2 (normalizeVersionString drops the v)
    assert loaded.get("0.2").native["min_compatible_version"] == "0.1"


def test_the_checksum_covers_the_listed_files(tree: Path) -> None:
    before = temporal.load(tree).get("0.2").checksum
    (tree / "v1.9" / "draft_not_listed.sql").write_text("DROP TABLE walks;\n")
    assert temporal.load(tree).get("0.2").checksum == before
    (tree / "v0.2" / "indexes.sql").write_text("CREATE INDEX walks_minutes_idx ON walks (minutes);")
    after = temporal.load(tree).get("0.2")
    assert after.checksum != before
    # the tool's md5 covers the manifest only: unchanged
    assert after.native["manifest_md5"] == "b62160235d6238cebeaec5921f7f90e3"


def test_resolve_and_pending_from_setup_version() -> None:
    loaded = temporal.load(DATA)
    assert loaded.resolve("v1.9") == "1.9"
    assert loaded.resolve("1.10") == "1.10"
    assert loaded.resolve(None) == "1.10"
    # after setup-schema -v 0.0 the database is at 0.0, a version the folder does not list
    assert [r.id for r in loaded.pending("0.0")] == list(loaded.ids)
    assert [r.id for r in loaded.pending("1.9")] == ["1.10"]
    assert [r.id for r in loaded.pending("0.1", to="v1.0")] == ["0.2", "1.0"]


# --- errors ----------------------------------------------------------------------------------


def load_error(root: Path) -> str:
    with pytest.raises(UsageError) as caught:
        temporal.load(root)
    return str(caught.value)


def test_a_folder_without_versions(tmp_path: Path) -> None:
    assert "no version folders" in load_error(tmp_path)


def test_a_missing_or_invalid_manifest(tree: Path) -> None:
    (tree / "v2.0").mkdir()
    assert "no manifest.json" in load_error(tree)
    (tree / "v2.0" / "manifest.json").write_text("{not json")
    assert "not valid JSON" in load_error(tree)
    (tree / "v2.0" / "manifest.json").write_text("[]")
    assert "expected a JSON object" in load_error(tree)


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"MinCompatibleVersion": "0.1", "SchemaUpdateCqlFiles": ["a.sql"]}, "CurrVersion"),
        ({"CurrVersion": "2.0", "SchemaUpdateCqlFiles": ["a.sql"]}, "MinCompatibleVersion"),
        ({"CurrVersion": "2.0", "MinCompatibleVersion": "x"}, "MinCompatibleVersion"),
        ({"CurrVersion": "2.0", "MinCompatibleVersion": "1.0"}, "AllowNoCqlFiles"),
        (
            {"CurrVersion": "2.0", "MinCompatibleVersion": "1.0", "SchemaUpdateCqlFiles": []},
            "AllowNoCqlFiles",
        ),
        (
            {"CurrVersion": "2.0", "MinCompatibleVersion": "1.0", "AllowNoCqlFiles": "yes"},
            "AllowNoCqlFiles must be bool",
        ),
        (
            {"CurrVersion": 2.0, "MinCompatibleVersion": "1.0", "AllowNoCqlFiles": True},
            "CurrVersion must be str",
        ),
    ],
)
def test_manifest_fields(tree: Path, fields: dict[str, Any], message: str) -> None:
    (tree / "v2.0").mkdir()
    (tree / "v2.0" / "a.sql").write_text("CREATE TABLE a (id INT);")
    write_manifest(tree / "v2.0", **fields)
    assert message in load_error(tree)


def test_field_names_match_case_insensitively_as_in_go(tree: Path) -> None:
    # encoding/json matches keys to field names without regard to case
    write_manifest(
        tree / "v2.0", currversion="2.0", MINCOMPATIBLEVERSION="1.9", allowNoCqlFiles=True
    )
    head = temporal.load(tree).get("2.0")
    assert head.native["min_compatible_version"] == "1.9"
    assert head.statements == ()


def test_the_folder_name_must_be_v_plus_curr_version(tree: Path) -> None:
    # buildChangeSet: m.CurrVersion != dirToVersion(vd) is an error
    write_manifest(
        tree / "v2.0", CurrVersion="2.1", MinCompatibleVersion="1.0", AllowNoCqlFiles=True
    )
    assert "does not match the folder name 'v2.0'" in load_error(tree)
    write_manifest(
        tree / "v2.0", CurrVersion="2.0.0", MinCompatibleVersion="1.0", AllowNoCqlFiles=True
    )
    assert "does not match" in load_error(tree)  # a string comparison, not a numeric one


def test_duplicate_versions(tree: Path) -> None:
    write_manifest(
        tree / "v1.9.0", CurrVersion="1.9.0", MinCompatibleVersion="1.0", AllowNoCqlFiles=True
    )
    assert "v1.9 and v1.9.0 are the same version 1.9.0" in load_error(tree)


def test_version_like_folders_that_are_not_versions(tree: Path) -> None:
    (tree / "notes").mkdir()  # ignored, as the tool ignores it
    (tree / "README.md").write_text("not a folder\n")
    assert temporal.load(tree).ids[-1] == "1.10"
    (tree / "v2.0-rc1").mkdir()
    assert "not a version folder name" in load_error(tree)


def test_a_listed_file_that_does_not_exist(tree: Path) -> None:
    write_manifest(
        tree / "v2.0",
        CurrVersion="2.0",
        MinCompatibleVersion="1.0",
        SchemaUpdateCqlFiles=["missing.sql"],
    )
    assert "listed file 'missing.sql' does not exist" in load_error(tree)


def test_a_listed_file_outside_the_set(tree: Path) -> None:
    (tree.parent / "outside.sql").write_text("CREATE TABLE x (id INT);")
    write_manifest(
        tree / "v2.0",
        CurrVersion="2.0",
        MinCompatibleVersion="1.0",
        SchemaUpdateCqlFiles=["../../outside.sql"],
    )
    assert "outside the set" in load_error(tree)


def test_a_listed_file_in_a_sibling_folder_is_read(tree: Path) -> None:
    # path.Join("v2.0", "../v1.9/vet_visits.sql") stays inside the set: the tool reads it
    write_manifest(
        tree / "v2.0",
        CurrVersion="2.0",
        MinCompatibleVersion="1.0",
        SchemaUpdateCqlFiles=["../v1.9/vet_visits.sql"],
    )
    head = temporal.load(tree).get("2.0")
    assert head.files == (Path("../v1.9/vet_visits.sql"),)
    assert head.statements == temporal.load(tree).get("1.9").statements


def test_listed_files_without_statements(tree: Path) -> None:
    (tree / "v2.0").mkdir()
    (tree / "v2.0" / "empty.sql").write_text("-- nothing yet\n")
    write_manifest(
        tree / "v2.0",
        CurrVersion="2.0",
        MinCompatibleVersion="1.0",
        SchemaUpdateCqlFiles=["empty.sql"],
    )
    assert "found 0 updates" in load_error(tree)  # parseSQLStmts
    write_manifest(
        tree / "v2.0",
        CurrVersion="2.0",
        MinCompatibleVersion="1.0",
        SchemaUpdateCqlFiles=["empty.sql"],
        AllowNoCqlFiles=True,
    )
    assert temporal.load(tree).get("2.0").statements == ()


@pytest.mark.parametrize(
    "sql",
    [
        "create table lower_case (id INT);",  # HasPrefix is case-sensitive
        "UPDATE dogs SET name = 'x';",
        "/* a block comment */ CREATE TABLE c (id INT);",  # the tool keeps /* */ comments
        "SELECT 1;",
    ],
)
def test_statements_the_tool_refuses(tree: Path, sql: str) -> None:
    (tree / "v2.0").mkdir()
    (tree / "v2.0" / "x.sql").write_text(sql)
    write_manifest(
        tree / "v2.0", CurrVersion="2.0", MinCompatibleVersion="1.0", SchemaUpdateCqlFiles=["x.sql"]
    )
    assert "temporal-sql-tool refuses a statement" in load_error(tree)


def test_line_comments_before_a_statement_are_skipped() -> None:
    temporal.check_statement("-- why\n  -- and how\nCREATE TABLE t (id INT)", "x.sql")
    temporal.check_statement("DO $$ BEGIN NULL; END $$", "x.sql")


# --- bookkeeping on the server ---------------------------------------------------------------

#: CreateSchemaVersionTables (admin.go, createSchemaVersionTableQuery and
#: createSchemaUpdateHistoryTableQuery): (column, type, nullable), in declaration order
SCHEMA_VERSION_COLUMNS = [
    ("version_partition", "integer", "NO"),
    ("db_name", "character varying(255)", "NO"),
    ("creation_time", "timestamp without time zone", "YES"),
    ("curr_version", "character varying(64)", "YES"),
    ("min_compatible_version", "character varying(64)", "YES"),
]
SCHEMA_UPDATE_HISTORY_COLUMNS = [
    ("version_partition", "integer", "NO"),
    ("year", "integer", "NO"),
    ("month", "integer", "NO"),
    ("update_time", "timestamp without time zone", "NO"),
    ("description", "character varying(255)", "YES"),
    ("manifest_md5", "character varying(64)", "YES"),
    ("new_version", "character varying(64)", "YES"),
    ("old_version", "character varying(64)", "YES"),
]
PRIMARY_KEYS = {
    "schema_version": ["version_partition", "db_name"],
    "schema_update_history": ["version_partition", "year", "month", "update_time"],
}


@pytest.fixture
def conn(empty_db: str) -> Iterator[psycopg.Connection[Any]]:
    with psycopg.connect(empty_db) as connection:
        yield connection


def columns(conn: psycopg.Connection[Any], table: str) -> list[tuple[str, str, str]]:
    return [
        (name, kind, nullable)
        for name, kind, nullable in conn.execute(
            "SELECT a.attname, format_type(a.atttypid, a.atttypmod),"
            " CASE WHEN a.attnotnull THEN 'NO' ELSE 'YES' END"
            " FROM pg_attribute a WHERE a.attrelid = %s::regclass"
            " AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum",
            (table,),
        ).fetchall()
    ]


def primary_key(conn: psycopg.Connection[Any], table: str) -> list[str]:
    row = conn.execute(
        "SELECT array_agg(a.attname ORDER BY k.ord) FROM pg_index i"
        " CROSS JOIN LATERAL unnest(i.indkey) WITH ORDINALITY AS k(attnum, ord)"
        " JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum"
        " WHERE i.indrelid = %s::regclass AND i.indisprimary",
        (table,),
    ).fetchone()
    assert row is not None
    return list(row[0])


def tables(conn: psycopg.Connection[Any]) -> set[str]:
    rows = conn.execute(
        "SELECT relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
        " WHERE n.nspname = 'public' AND c.relkind = 'r'"
    ).fetchall()
    return {r[0] for r in rows}


def history(conn: psycopg.Connection[Any]) -> list[tuple[Any, ...]]:
    return conn.execute(
        "SELECT version_partition, year, month, update_time, old_version, new_version,"
        " manifest_md5, description FROM schema_update_history ORDER BY update_time"
    ).fetchall()


def version_row(conn: psycopg.Connection[Any]) -> tuple[Any, ...]:
    rows = conn.execute(
        "SELECT version_partition, db_name, creation_time, curr_version,"
        " min_compatible_version FROM schema_version"
    ).fetchall()
    assert len(rows) == 1
    return tuple(rows[0])


def test_current_without_the_tables_is_none_and_harmless(conn: psycopg.Connection[Any]) -> None:
    with conn.transaction():
        assert temporal.current(conn) is None
        assert conn.execute("SELECT 1").fetchone() == (1,)  # the transaction is still usable
    with conn.cursor() as cursor:
        assert temporal.current(cursor) is None


def test_setup_writes_what_setup_schema_v0_0_writes(conn: psycopg.Connection[Any]) -> None:
    dbname = conn.info.dbname
    with conn.transaction():
        temporal.setup(conn)
    assert tables(conn) == {"schema_version", "schema_update_history"}  # nothing else
    assert columns(conn, "schema_version") == SCHEMA_VERSION_COLUMNS
    assert columns(conn, "schema_update_history") == SCHEMA_UPDATE_HISTORY_COLUMNS
    for table, key in PRIMARY_KEYS.items():
        assert primary_key(conn, table) == key
    # UpdateSchemaVersion(db, "0.0", "0.0"): partition 0, db_name = --db (the database the
    # tool connected to), creation_time = time.Now().UTC() in a TIMESTAMP column
    partition, db_name, created, curr, minimum = version_row(conn)
    assert (partition, db_name, curr, minimum) == (0, dbname, "0.0", "0.0")
    now = datetime.now(UTC).replace(tzinfo=None)
    assert abs(created - now) < timedelta(minutes=1)  # UTC wall clock, no zone
    # WriteSchemaUpdateLog("0", "0.0", "", "initial version"): year/month of update_time
    [(partition, year, month, at, old, new, md5, description)] = history(conn)
    assert (partition, year, month) == (0, at.year, at.month)
    assert (old, new, md5, description) == ("0", "0.0", "", "initial version")
    assert temporal.current(conn) == "0.0"


def test_record_writes_what_each_update_schema_step_writes(
    conn: psycopg.Connection[Any],
) -> None:
    loaded: MigrationSet = temporal.load(DATA)
    with conn.transaction():
        temporal.setup(conn)
        previous = "0.0"
        # all five steps in one transaction: update_time (in the primary key) stays distinct
        for revision in loaded.revisions:
            temporal.record(conn, revision, previous)
            previous = revision.id
    assert temporal.current(conn) == "1.10"
    # UpdateSchemaVersion(db, cs.version, manifest.MinCompatibleVersion): one row, upserted
    partition, db_name, _, curr, minimum = version_row(conn)
    assert (partition, db_name, curr, minimum) == (0, conn.info.dbname, "1.10", "1.9")
    # WriteSchemaUpdateLog(oldVer, manifest.CurrVersion, manifest.md5, manifest.Description)
    rows = history(conn)
    assert [(old, new, md5, desc) for *_, old, new, md5, desc in rows] == [
        ("0", "0.0", "", "initial version"),
        ("0.0", "0.1", "bfad0361293c9843a348ccd288eeb64e", "kennels and their dogs"),
        (
            "0.1",
            "0.2",
            "b62160235d6238cebeaec5921f7f90e3",
            "walks; the index file is listed after the table it indexes",
        ),
        ("0.2", "1.0", "7e49cd0c470fb3acfe4b23f4f638b223", "version bump only: no schema change"),
        ("1.0", "1.9", "6a151ba8e2cc214a51e80b555d457652", "vet visits"),
        ("1.9", "1.10", "e972f1572be4cb2707109828864b8e86", "walk totals, filled by a DO block"),
    ]
    stamps = [at for _, _, _, at, *_ in rows]
    assert stamps == sorted(set(stamps))  # distinct, in the order written
    assert all((y, m) == (at.year, at.month) for _, y, m, at, *_ in rows)
    assert tables(conn) == {"schema_version", "schema_update_history"}


def test_setup_again_follows_the_tool(conn: psycopg.Connection[Any]) -> None:
    loaded = temporal.load(DATA)
    with conn.transaction():
        temporal.setup(conn)
        temporal.setup(conn)  # at 0.0, not past it: the tool writes the 0.0 rows again
    assert len(history(conn)) == 2
    with conn.transaction():
        temporal.record(conn, loaded.get("0.1"), "0.0")
        temporal.setup(conn)  # past 0.0: the tool only creates the tables (if missing)
    assert temporal.current(conn) == "0.1"
    assert len(history(conn)) == 3


def test_the_version_row_is_keyed_on_the_database_name(conn: psycopg.Connection[Any]) -> None:
    with conn.transaction():
        temporal.setup(conn)
        # another database's row in the same table (the tool's key is (0, db_name))
        conn.execute("INSERT INTO schema_version VALUES (0, 'elsewhere', now(), '9.9', '9.9')")
    assert temporal.current(conn) == "0.0"


def test_the_statements_are_inspectable_without_a_server() -> None:
    statements: list[tuple[str, dict[str, Any]]] = temporal.setup_statements()
    assert [sql.split("(")[0].split()[-1] for sql, _ in statements[:2]] == [
        "schema_version",
        "schema_update_history",
    ]
    assert statements[2][1] == {"curr_version": "0.0", "min_compatible_version": "0.0"}
    assert statements[3][1] == {
        "old_version": "0",
        "new_version": "0.0",
        "manifest_md5": "",
        "description": "initial version",
    }
    step: Callable[..., list[tuple[str, dict[str, Any]]]] = temporal.record_statements
    head = temporal.load(DATA).get("1.10")
    assert step(head, "1.9")[1][1]["old_version"] == "1.9"


def test_the_set_applies_and_records_in_one_transaction(conn: psycopg.Connection[Any]) -> None:
    """The use `upgrade` makes of it: each version's statements, then its bookkeeping."""
    loaded = temporal.load(DATA)
    with conn.transaction():
        temporal.setup(conn)
        at = temporal.current(conn)
        for revision in loaded.pending(at):
            for statement in revision.statements or ():
                conn.execute(statement)
            temporal.record(conn, revision, at or temporal.INITIAL_VERSION)
            at = revision.id
    assert temporal.current(conn) == "1.10"
    assert tables(conn) == {
        "schema_version",
        "schema_update_history",
        "kennels",
        "dogs",
        "walks",
        "vet_visits",
    }
    assert ("walked_minutes", "bigint", "NO") in columns(conn, "dogs")


def test_a_version_row_kept_under_other_names_is_said_with_the_statement_to_adopt() -> None:
    two = temporal.keyed_elsewhere("staging", [("prod", "1.12"), ("o'ld", None)])
    assert two.startswith(
        "no version row for database staging; schema_version has 2 rows for prod at 1.12, "
        "o'ld at no version (restored under another name?)"
    )
    assert temporal.take_over_statement("o'ld").endswith("AND db_name = 'o''ld';")


# --- manifests and statements, exactly as said -----------------------------------------------


def manifest_error(raw: bytes) -> str:
    with pytest.raises(UsageError) as caught:
        temporal.parse_manifest(raw, "v2.0/manifest.json")
    return str(caught.value)


def test_a_null_manifest_is_an_empty_one() -> None:
    # encoding/json leaves the struct's zero values for `null`: no CurrVersion
    assert manifest_error(b"null") == "v2.0/manifest.json: invalid CurrVersion ''"


def test_unknown_keys_and_null_values_are_ignored() -> None:
    parsed = temporal.parse_manifest(
        json.dumps(
            {
                "Description": None,  # null first: the keys after it are still read
                "Extra": 1,
                "CurrVersion": "2.0",
                "MinCompatibleVersion": "1.0",
                "AllowNoCqlFiles": True,
            }
        ).encode(),
        "m",
    )
    assert parsed.description == ""
    assert parsed.files == ()
    assert parsed.allow_no_files is True


def test_manifest_errors_as_said() -> None:
    assert manifest_error(b'{"CurrVersion": "2.0", "SchemaUpdateCqlFiles": [1]}') == (
        "v2.0/manifest.json: SchemaUpdateCqlFiles must be a list of strings, got [1]"
    )
    assert manifest_error(b'{"CurrVersion": "2.0"}') == (
        "v2.0/manifest.json: invalid MinCompatibleVersion ''"
    )
    assert manifest_error(b"[]") == "v2.0/manifest.json: expected a JSON object, got list"
    assert manifest_error(b"{not json").startswith("v2.0/manifest.json: not valid JSON (")
    assert manifest_error(b'{"CurrVersion": "2.0", "MinCompatibleVersion": "1.0"}') == (
        "v2.0/manifest.json: SchemaUpdateCqlFiles lists no files (a version without statements "
        'needs "AllowNoCqlFiles": true)'
    )


def test_versions_in_a_manifest_lose_one_leading_v() -> None:
    parsed = temporal.parse_manifest(
        b'{"CurrVersion": "v2.0", "MinCompatibleVersion": "v1.0", "AllowNoCqlFiles": true}', "m"
    )
    assert (parsed.curr_version, parsed.min_compatible_version) == ("2.0", "1.0")
    assert temporal._normalize("vv1") == "v1"
    assert temporal._normalize("1.0") == "1.0"


def test_a_v_prefixed_curr_version_matches_its_folder(tree: Path) -> None:
    write_manifest(
        tree / "v2.0", CurrVersion="v2.0", MinCompatibleVersion="1.0", AllowNoCqlFiles=True
    )
    assert temporal.load(tree).ids[-1] == "2.0"


def test_a_refused_statement_is_named_by_its_first_word() -> None:
    with pytest.raises(UsageError) as caught:
        temporal.check_statement("UPDATE dogs SET name = 'x'", "x.sql")
    assert str(caught.value) == (
        "x.sql: temporal-sql-tool refuses a statement starting with 'UPDATE' "
        "(it accepts only CREATE, ALTER, INSERT, DROP, DO, upper case)"
    )
    with pytest.raises(UsageError, match="refuses a statement starting with ''"):
        temporal.check_statement("-- only a comment", "x.sql")


def test_only_leading_comment_lines_are_skipped() -> None:
    temporal.check_statement("-- why\nCREATE TABLE t (\n  id INT\n)", "x.sql")
    with pytest.raises(UsageError, match="starting with 'id'"):
        temporal.check_statement("id INT -- a comment\n", "x.sql")


def test_a_listed_file_naming_the_sets_parent_is_outside_the_set(tree: Path) -> None:
    write_manifest(
        tree / "v2.0", CurrVersion="2.0", MinCompatibleVersion="1.0", SchemaUpdateCqlFiles=["../.."]
    )
    assert "listed file '../..' is outside the set" in load_error(tree)


def test_the_version_key_reads_every_spelling() -> None:
    assert temporal.version_key(" v1.10 ") == (1, 10, 0)
    assert temporal.version_key("2") == (2, 0, 0)
    assert temporal.version_key("1.2.3") == (1, 2, 3)
    with pytest.raises(UsageError, match=r"not a Temporal schema version: 'vv1'"):
        temporal.version_key("vv1")


def test_a_version_row_under_another_name_is_refused_and_can_be_taken_over(
    conn: psycopg.Connection[Any],
) -> None:
    assert temporal.take_over_version(conn, "prod") == 0  # no table: nothing to move
    conn.commit()
    with conn.transaction():
        temporal.setup(conn)
        conn.execute("UPDATE schema_version SET db_name = 'prod'")
    with pytest.raises(VersionKeyedElsewhere) as caught:
        temporal.current(conn)
    assert str(caught.value).startswith(
        f"no version row for database {conn.info.dbname}; schema_version has one for prod at "
        "0.0 (restored under another name?)"
    )
    conn.rollback()
    assert temporal.take_over_version(conn, "staging") == 0
    assert temporal.take_over_version(conn, "prod") == 1
    assert temporal.current(conn) == "0.0"


def test_a_version_row_without_a_version_is_no_version(conn: psycopg.Connection[Any]) -> None:
    with conn.transaction():
        temporal.setup(conn)
        conn.execute("UPDATE schema_version SET curr_version = NULL")
    assert temporal.current(conn) is None


def test_leading_whitespace_before_a_statement_is_skipped() -> None:
    temporal.check_statement("\n  CREATE TABLE t (id INT)", "x.sql")


def test_a_root_with_version_folders_of_its_own_is_read_even_beside_versioned(
    tree: Path,
) -> None:
    (tree / "versioned").mkdir()  # the root's own v* folders win
    assert temporal.load(tree).root == tree
    assert temporal.detect(tree)


def test_load_errors_name_the_file_they_come_from(tree: Path) -> None:
    (tree / "v2.0").mkdir()
    manifest = tree / "v2.0" / "manifest.json"
    manifest.write_text('{"CurrVersion": 2}')
    assert load_error(tree) == f"{manifest}: CurrVersion must be str, got 2"
    write_manifest(
        tree / "v2.0",
        CurrVersion="2.0",
        MinCompatibleVersion="1.0",
        SchemaUpdateCqlFiles=["missing.sql"],
    )
    assert load_error(tree) == (
        f"{manifest}: listed file 'missing.sql' does not exist ({tree / 'v2.0' / 'missing.sql'})"
    )
    write_manifest(
        tree / "v2.0", CurrVersion="2.0", MinCompatibleVersion="1.0", SchemaUpdateCqlFiles=["a.sql"]
    )
    sql = tree / "v2.0" / "a.sql"
    sql.write_text("-- nothing\n")
    assert load_error(tree) == (
        f"{manifest}: its files hold no statements (the tool: found 0 updates)"
    )
    sql.write_text("UPDATE dogs SET name = 'x';")
    assert load_error(tree).startswith(f"{sql}: temporal-sql-tool refuses a statement")
    sql.write_bytes(b"CREATE TABLE caf\xe9 (id INT);")
    assert load_error(tree).startswith(f"{sql}: not UTF-8 (")
    sql.write_text("CREATE TABLE t (name text DEFAULT 'unterminated);")
    message = load_error(tree)
    assert message.startswith(f"{sql}: ") and "line 1" in message


def test_the_statement_that_adopts_a_single_row_kept_under_another_name() -> None:
    assert temporal.keyed_elsewhere("staging", [("prod", "1.12")]) == (
        "no version row for database staging; schema_version has one for prod at 1.12 "
        "(restored under another name?); nothing was changed. To adopt it: UPDATE "
        "schema_version SET db_name = current_database() WHERE version_partition = 0 AND "
        "db_name = 'prod';"
    )
    assert temporal.keyed_elsewhere("staging", [("a", "1.0"), ("b", "1.1")]).endswith(
        "To adopt the one it was restored from: UPDATE schema_version SET db_name = "
        "current_database() WHERE version_partition = 0 AND db_name = 'NAME';"
    )
