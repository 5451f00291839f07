"""`fleet verify`: every target at head with one catalog; one drifted target among many is
named with what differs, by name, and a clean fleet has no false positive."""

from __future__ import annotations

import json

import pytest

from tests.fleet.conftest import Fleet

TENANTS = [f"tenant_{i}" for i in range(5)]
#: the set's head as a fresh install writes it (objects in public)
FRESH = """
CREATE TABLE items (id bigint PRIMARY KEY, note text, owner_id bigint,
                    flag boolean NOT NULL DEFAULT false);
CREATE INDEX items_owner_idx ON items (owner_id);
"""


def test_one_drifted_schema_among_many_is_named_and_a_clean_fleet_passes(
    fleet: Fleet, capsys: pytest.CaptureFixture[str]
) -> None:
    shared = fleet.schemas("shared", TENANTS)
    path = fleet.targets_file(f"[[discover]]\ndsn = \"{shared}\"\nschemas = 'tenant\\_%'\n")
    code, _, err = fleet.cli(capsys, "upgrade", "--targets", str(path))
    assert code == 0, err
    fresh = fleet.root / "fresh.sql"
    fresh.write_text(FRESH)

    code, out, _ = _verify(fleet, capsys, str(path), "--fresh", str(fresh))
    doc = json.loads(out)
    assert code == 0, doc
    assert len(doc["groups"]) == 1 and not any(t.get("differences") for t in doc["targets"])

    fleet.sql(
        shared,
        "DROP INDEX tenant_3.items_owner_idx; "
        "ALTER TABLE tenant_3.items ALTER COLUMN note TYPE varchar(40); "
        "CREATE TABLE tenant_3.stray (id int)",
    )
    code, out, _ = _verify(fleet, capsys, str(path))
    doc = json.loads(out)
    assert code == 1
    assert [len(g["targets"]) for g in doc["groups"]] == [4, 1]
    drifted = {t["name"]: t.get("differences", []) for t in doc["targets"] if t.get("differences")}
    assert list(drifted) == [f"{fleet.prefix}_shared/tenant_3"]
    found = drifted[f"{fleet.prefix}_shared/tenant_3"]
    assert "missing index {schema}.items_owner_idx" in found
    assert any(
        d.startswith("column {schema}.items.note differs: character varying(40)") for d in found
    )
    assert any(d.startswith("extra table {schema}.stray") for d in found)


def _verify(fleet: Fleet, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    from queueguard.cli import main

    code = main(["fleet", "verify", "--targets", *args, "--json"])
    out, err = capsys.readouterr()
    return code, out, err


def test_a_target_behind_head_fails_verify(
    fleet: Fleet, capsys: pytest.CaptureFixture[str]
) -> None:
    shared = fleet.schemas("shared", TENANTS[:2])
    path = fleet.targets_file(f"[[discover]]\ndsn = \"{shared}\"\nschemas = 'tenant\\_%'\n")
    code, _, err = fleet.cli(capsys, "upgrade", "--targets", str(path), "--to", "0002")
    assert code == 0, err
    code, out, _ = _verify(fleet, capsys, str(path))
    doc = json.loads(out)
    assert code == 1
    assert {t["revision"] for t in doc["targets"]} == {"0002"}
    assert not any(t["atHead"] for t in doc["targets"])


def test_functions_triggers_and_a_schema_named_like_its_table_are_no_drift(
    fleet: Fleet, capsys: pytest.CaptureFixture[str]
) -> None:
    """Schema names inside function texts and names equal to a table's are the placeholder,
    not a difference (`items` holds a table `items`)."""
    fleet.write_set({
        "0001_items.sql": "CREATE TABLE items (id bigint PRIMARY KEY, n int);\n"
        "CREATE FUNCTION bump() RETURNS trigger LANGUAGE plpgsql AS "
        "$$ BEGIN NEW.n := coalesce(NEW.n, 0) + 1; RETURN NEW; END $$;\n"
        "CREATE TRIGGER items_bump BEFORE INSERT ON items FOR EACH ROW EXECUTE FUNCTION bump();\n",
    })  # fmt: skip
    shared = fleet.schemas("shared", ["items", "tenant_1", "tenant_10"])
    path = fleet.targets_file(
        "".join(
            f'[[targets]]\nname = "{s}"\ndsn = "{shared}"\nschema = "{s}"\n'
            for s in ("items", "tenant_1", "tenant_10")
        )
    )
    code, _, err = fleet.cli(capsys, "upgrade", "--targets", str(path))
    assert code == 0, err
    code, out, _ = _verify(fleet, capsys, str(path))
    doc = json.loads(out)
    assert code == 0, doc
    assert len(doc["groups"]) == 1
