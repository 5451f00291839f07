"""goose and dbmate folders read by their markers: the up section only (a file applied whole
would run its down section right after), goose's StatementBegin/End block as one statement
and its NO TRANSACTION kept; markers that cannot be read as their tool reads them refused
naming the convention."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import psycopg
import pytest

from queueguard.cli import main
from queueguard.errors import UsageError
from queueguard.sets import sqldir
from queueguard.sets.sql_markers import NO_TRANSACTION, read, up_text

GOOSE_1 = """-- +goose Up
CREATE TABLE pet (id int PRIMARY KEY, name text);
INSERT INTO pet VALUES (1, 'rex');

-- +goose Down
DROP TABLE pet;
"""
GOOSE_2 = """-- a comment before the up section
-- +goose Up
-- +goose StatementBegin
CREATE FUNCTION pet_name(i int) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
  RETURN (SELECT name FROM pet WHERE id = i);
END;
$$;
-- +goose StatementEnd
ALTER TABLE pet ADD COLUMN age int;

-- +goose Down
-- +goose StatementBegin
DROP FUNCTION pet_name(int);
-- +goose StatementEnd
ALTER TABLE pet DROP COLUMN age;
"""
GOOSE_3 = """-- +goose NO TRANSACTION
-- +goose Up
CREATE INDEX CONCURRENTLY pet_age ON pet (age);

-- +goose Down
DROP INDEX CONCURRENTLY pet_age;
"""
DBMATE_1 = """-- migrate:up
CREATE TABLE owner (id int PRIMARY KEY);
INSERT INTO owner VALUES (7);

-- migrate:down
DROP TABLE owner;
"""
DBMATE_2 = """-- migrate:up transaction:false
CREATE INDEX CONCURRENTLY owner_id ON owner (id);

-- migrate:down
DROP INDEX owner_id;
"""


def test_goose_up_sections_with_their_blocks_and_no_transaction() -> None:
    assert read(GOOSE_1, "1.sql").statements == [
        "CREATE TABLE pet (id int PRIMARY KEY, name text)",
        "INSERT INTO pet VALUES (1, 'rex')",
    ]
    second = read(GOOSE_2, "2.sql").statements
    assert len(second) == 2 and second[0].startswith("CREATE FUNCTION pet_name")
    assert second[0].endswith("$$") and "RETURN (SELECT" in second[0]
    assert second[1] == "ALTER TABLE pet ADD COLUMN age int"
    third = read(GOOSE_3, "3.sql")
    assert third.statements == ["CREATE INDEX CONCURRENTLY pet_age ON pet (age)"]
    assert third.native == {NO_TRANSACTION: True}


def test_dbmate_up_sections() -> None:
    assert read(DBMATE_1, "1.sql").statements == [
        "CREATE TABLE owner (id int PRIMARY KEY)",
        "INSERT INTO owner VALUES (7)",
    ]
    assert read(DBMATE_2, "2.sql").native == {NO_TRANSACTION: True}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("-- +goose Down\nDROP TABLE pet;\n-- +goose Up\nSELECT 1;\n", "goose migration"),
        ("DROP TABLE pet;\n-- +goose Down\n", "goose migration"),
        ("-- +goose Up\n-- +goose ENVSUB ON\nSELECT '${X}';\n", "ENVSUB ON` unsupported"),
        ("-- +goose Up\n-- +goose StatementBegin\nSELECT 1;\n", "StatementBegin without"),
        ("-- migrate:down\nDROP TABLE owner;\n", "dbmate migration"),
        ("-- migrate:up\nSELECT 1;\n-- migrate:up\nSELECT 2;\n", "2 `-- migrate:up` markers"),
    ],
)
def test_markers_their_tool_would_not_read_are_refused(text: str, message: str) -> None:
    with pytest.raises(UsageError, match=message) as caught:
        read(text, "x.sql")
    assert "not applied whole" in str(caught.value)


@pytest.mark.parametrize(
    ("files", "kept", "query"),
    [
        ({"00001_pet.sql": GOOSE_1, "00002_age.sql": GOOSE_2, "00003_index.sql": GOOSE_3},
         "SELECT pet_name(1), to_regclass('pet_age') IS NOT NULL", ("rex", True)),
        ({"20240105120000_owner.sql": DBMATE_1, "20240105120100_index.sql": DBMATE_2},
         "SELECT id, to_regclass('owner_id') IS NOT NULL FROM owner", (7, True)),
    ],
)  # fmt: skip
def test_a_folder_upgrades_to_its_up_sections_never_its_down_ones(
    tmp_path: Path,
    make_db: Callable[..., str],
    capsys: pytest.CaptureFixture[str],
    files: dict[str, str],
    kept: str,
    query: tuple[object, ...],
) -> None:
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    assert sqldir.detect(tmp_path)
    dsn = make_db()
    code = main(["upgrade", "--migrations", str(tmp_path), "--dsn", dsn])
    assert code == 0, capsys.readouterr().err
    with psycopg.connect(dsn) as conn:
        assert conn.execute(kept).fetchone() == query


@pytest.mark.parametrize(
    "files",
    [
        {"00001_pet.sql": GOOSE_1, "00002_age.sql": GOOSE_2},
        {"20240105120000_owner.sql": DBMATE_1},
    ],
)
def test_lint_reads_the_up_sections_alone_at_their_own_lines(
    tmp_path: Path, files: dict[str, str]
) -> None:
    """squawk is given the up section with every other line blanked: no finding for a
    statement the upgrade never runs (the down sections' DROPs), and a finding keeps its
    line in the file."""
    from queueguard import sets
    from queueguard.lint.sets import lint_set

    for name, text in files.items():
        (tmp_path / name).write_text(text)
    report = lint_set(sets.load(tmp_path))
    codes = {s.code for s in report.flagged} | {c for s in report.flagged for c in s.suppressed}
    assert not any("drop" in str(code) for code in codes), codes
    for text in files.values():
        up = up_text(text)
        assert len(up.splitlines()) == len(text.splitlines())
        assert "DROP" not in up and "CREATE" in up and "+goose" not in up and "migrate:" not in up
