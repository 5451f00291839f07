"""`rehearse --migrations DIR` for a set of another format: the pending revisions applied to
a copy of the user's database, each statement's real duration and lock hold next to plan's
estimate; the source is not written."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import psycopg
import pytest

from queueguard import sets
from queueguard.cli import main
from queueguard.engine import catalog
from queueguard.engine.apply.runner import upgrade

DATA = Path(__file__).parents[1] / "sets" / "data"


def test_rehearse_reports_each_statement_next_to_the_plan_and_leaves_the_source(
    make_db: Callable[..., str], capsys: pytest.CaptureFixture[str]
) -> None:
    mset = sets.load(DATA / "temporal")
    source = make_db()
    upgrade(mset, source, to="0.1")
    with psycopg.connect(source) as conn:
        conn.execute("INSERT INTO kennels SELECT g, 'k' || g FROM generate_series(1, 20) g")
        conn.execute(
            "INSERT INTO dogs SELECT 1 + g % 20, g, 'd' || g FROM generate_series(1, 500) g"
        )
    before = catalog.fingerprint(source)
    code = main(["rehearse", "--migrations", str(DATA / "temporal"), "--dsn", source, "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert code == 0 and (doc["before"], doc["after"]) == ("0.1", "1.10")
    assert len(doc["statements"]) == 6  # 0.2: three, 1.9: one, 1.10: two (1.0 has none)
    alter = next(
        s for s in doc["statements"] if s["sql"].startswith("ALTER TABLE dogs ADD COLUMN born")
    )
    assert alter["locks"] == [{"relation": "dogs", "mode": "AccessExclusiveLock"}]
    assert alter["took_ms"] >= 0 and alter["held_ms"] >= alter["took_ms"]
    assert all(s["estimate_ms"] is not None for s in doc["statements"]), doc
    assert catalog.fingerprint(source) == before  # the source was only read
    with psycopg.connect(source) as conn:
        assert conn.execute("SELECT curr_version FROM schema_version").fetchone() == ("0.1",)


def test_rehearse_holds_invariants_on_the_copy(
    make_db: Callable[..., str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    mset = sets.load(DATA / "temporal")
    source = make_db()
    upgrade(mset, source, to="0.1")
    with psycopg.connect(source) as conn:
        conn.execute("INSERT INTO kennels SELECT g, 'k' || g FROM generate_series(1, 5) g")
        conn.execute("INSERT INTO dogs SELECT 1 + g % 5, g, 'd' || g FROM generate_series(1, 40) g")
    invariants = tmp_path / "invariants.sql"
    invariants.write_text(
        "-- name: dogs_per_kennel\nSELECT kennel_id, count(*) FROM dogs GROUP BY kennel_id;\n"
        # an intended change shows: dogs gains columns, so this one must fail
        "-- name: dog_columns\nSELECT count(*) FROM information_schema.columns "
        "WHERE table_name = 'dogs';\n"
    )
    argv = ["rehearse", "--migrations", str(DATA / "temporal"), "--dsn", source]
    code = main([*argv, "--invariants", str(invariants), "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert code == 1 and doc["ok"] is False
    verdicts = {c["subject"].split(" on ")[0]: c["ok"] for c in doc["checks"]}
    assert verdicts == {"dogs_per_kennel": True, "dog_columns": False}
    failed = next(c for c in doc["checks"] if not c["ok"])
    assert failed["problems"] == ["only before: (3)", "only after: (5)"]
    assert main([*argv, "--invariants", str(tmp_path / "missing.sql")]) == 2


def test_rehearse_of_an_alembic_set_reports_every_statement_it_ran(
    make_db: Callable[..., str], capsys: pytest.CaptureFixture[str]
) -> None:
    """Statements observed at the driver, each with its time, its hold and plan's estimate."""
    source = make_db()
    argv = ["rehearse", "--migrations", str(DATA / "alembic_plain"), "--dsn", source, "--json"]
    code = main(argv)
    doc = json.loads(capsys.readouterr().out)
    assert code == 0 and (doc["before"], doc["after"]) == (None, "3c2e70914d03")
    sent = [(s["revision"][:2], " ".join(s["sql"].split()[:3])) for s in doc["statements"]]
    assert sent == [
        ("1a", "CREATE TABLE item"),
        ("1a", "INSERT INTO item"),
        ("2b", "ALTER TABLE item"),
        ("2b", "SELECT id, name"),
        ("2b", "UPDATE item SET"),
        ("2b", "UPDATE item SET"),
        ("3c", "CREATE INDEX CONCURRENTLY"),
    ], sent
    for s in doc["statements"]:
        assert s["took_ms"] >= 0 and s["held_ms"] >= s["took_ms"], s
        assert s["estimate_ms"] is not None and s["estimate_held_ms"] is not None, s
    concurrent = doc["statements"][-1]
    assert concurrent["transactional"] is False and concurrent["held_ms"] == concurrent["took_ms"]
    assert concurrent["locks"] == [{"relation": "item", "mode": "ShareUpdateExclusiveLock"}]


def test_rehearse_puts_what_the_copy_wrote_beside_plans_wal_and_disk(
    make_db: Callable[..., str],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A rewrite of a 100 k-row table: plan's WAL and extra disk at the target's size next to
    what the copy really wrote (WAL server-wide: other sessions' too, so only the lower side
    is held; the ratios printed)."""
    from queueguard.engine.rehearse import written

    monkeypatch.setattr(written, "SAMPLE_S", 0.005)  # the rewrite's new file lives ~0.3 s
    folder = tmp_path / "set"
    folder.mkdir()
    (folder / "V1__t.sql").write_text(
        "CREATE TABLE t (id bigint PRIMARY KEY, v int NOT NULL, w text NOT NULL);\n"
        "INSERT INTO t SELECT g, g, md5(g::text) FROM generate_series(1, 100000) g;"
    )
    (folder / "V2__bigint.sql").write_text("ALTER TABLE t ALTER COLUMN v TYPE bigint;")
    source = make_db()
    upgrade(sets.load(folder), source, to="1")
    code = main(["rehearse", "--migrations", str(folder), "--dsn", source, "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert code == 0, doc
    [statement] = doc["statements"]
    wal, disk = doc["walBytes"], doc["extraDiskBytes"]
    assert statement["wal_bytes"] == wal["predicted"] > 0
    assert statement["extra_disk_bytes"] == disk["predicted"] > 0
    print(f"WAL written/predicted {wal['written'] / wal['predicted']:.2f}, "
          f"disk peak/predicted {disk['peak'] / disk['predicted']:.2f}")  # fmt: skip
    assert wal["written"] >= wal["predicted"] / 3
    assert disk["predicted"] / 3 <= disk["peak"] <= disk["predicted"] * 3
