"""plan's WAL and extra disk: a rewrite, an index build and a validation observed on a sample
of a tenth of the table, scaled to the table, against the same statements run on a copy of
it (generous bounds: the ratios are printed)."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import psycopg

from queueguard import sets
from queueguard.engine.plan.observe import WalMeter, new_files
from queueguard.engine.plan.planner import plan
from queueguard.pg import scratch

ROWS, SAMPLE = 40_000, 4_000
#: the index and the validation are on a table of their own: after the rewrite, the first scan
#: of `t`'s new pages sets their hint bits, whose full-page images depend on checkpoints
TARGET = f"""
CREATE TABLE t (id bigint PRIMARY KEY, v int NOT NULL, w text NOT NULL);
INSERT INTO t SELECT g, g, md5(g::text) FROM generate_series(1, {ROWS}) g;
CREATE TABLE u (LIKE t INCLUDING ALL);
INSERT INTO u SELECT * FROM t;
"""
STATEMENTS = {
    "0001": "ALTER TABLE t ALTER COLUMN v TYPE bigint",  # a rewrite: heap and index again
    "0002": "CREATE INDEX u_w ON u (w)",  # an index build
    "0003": "ALTER TABLE u ADD CONSTRAINT u_v CHECK (v >= 0)",  # a validation: a scan
}


def _real(dsn: str) -> dict[str, tuple[int, int]]:
    """Each statement on a copy of the table, its WAL and new files measured alike."""
    found = {}
    with psycopg.connect(dsn) as conn:
        meter = WalMeter(conn)
        for rid, statement in STATEMENTS.items():
            before = meter.mark(conn)
            conn.execute(statement)
            disk = new_files(conn, ["t"] if rid == "0001" else ["u_w"] if rid == "0002" else [])
            conn.commit()
            found[rid] = (meter.mark(conn) - before, disk)
    return found


def test_wal_and_disk_scaled_from_a_tenth_are_within_twice_the_real(
    tmp_path: Path, make_db: Callable[..., str], pg_admin_dsn: str
) -> None:
    for name, statement in STATEMENTS.items():
        (tmp_path / f"{name}.sql").write_text(statement + ";\n")
    target = make_db()
    with psycopg.connect(target, autocommit=True) as conn:
        conn.execute(TARGET)  # type: ignore[arg-type]
        conn.execute("VACUUM (FREEZE, ANALYZE)")  # hint bits set, as on the sample
    copy = make_db(template=scratch.dbname_of(target))
    doc = plan(
        sets.load(tmp_path, "sqldir"), target, scratch_admin=pg_admin_dsn, sample_rows=SAMPLE
    ).document()
    real = _real(copy)
    billed = {r["id"]: r["statements"][0] for r in doc["revisions"]}
    for rid in ("0001", "0002"):
        wal, disk = billed[rid]["wal_bytes"], billed[rid]["extra_disk_bytes"]
        real_wal, real_disk = real[rid]
        print(f"{rid}: WAL {wal} vs {real_wal} ({wal / real_wal:.2f}), "
              f"disk {disk} vs {real_disk} ({disk / real_disk:.2f})")  # fmt: skip
        assert 0.5 <= wal / real_wal <= 2, (rid, wal, real_wal)
        assert 0.5 <= disk / real_disk <= 2, (rid, disk, real_disk)
    # a validation only reads: its WAL is small on both sides, and it leaves no new file
    assert billed["0003"]["extra_disk_bytes"] == 0 == real["0003"][1]
    assert billed["0003"]["wal_bytes"] < 1_000_000 and real["0003"][0] < 1_000_000
    assert doc["walBytes"] == sum(s["wal_bytes"] for s in billed.values())
    assert doc["extraDiskBytes"] == max(s["extra_disk_bytes"] for s in billed.values())
    assert {s["wal_basis"] for s in billed.values()} <= {
        "its session's",
        "upper bound, server-wide",
    }


def test_an_index_named_with_its_table_is_counted_once(make_db: Callable[..., str]) -> None:
    with psycopg.connect(make_db(), autocommit=True) as conn:
        conn.execute("CREATE TABLE t (id bigint PRIMARY KEY, w text)")
        conn.execute("INSERT INTO t SELECT g, md5(g::text) FROM generate_series(1, 5000) g")
        total = conn.execute("SELECT pg_total_relation_size('t')").fetchone()
        assert total is not None
        assert new_files(conn, ["t", "t_pkey"]) == new_files(conn, ["t"]) == total[0]
        index = conn.execute("SELECT pg_relation_size('t_pkey')").fetchone()
        assert index is not None and new_files(conn, ["t_pkey"]) == index[0]


REVISION = """
from alembic import op

revision = "{rid}"
down_revision = {down}


def upgrade() -> None:
    op.execute("{sql}")
"""


def test_a_python_revisions_statements_are_billed_wal_and_disk_too(
    tmp_path: Path, make_db: Callable[..., str], pg_admin_dsn: str
) -> None:
    """The same statements sent by Alembic revisions (through env.py, in one transaction):
    WAL read from the server's insert position around each (an upper bound: other sessions
    write too, so only the lower side is held), new files read before the commit."""
    project = tmp_path / "project"
    shutil.copytree(Path(__file__).parents[1] / "sets" / "data" / "alembic_plain", project)
    versions = project / "migrations" / "versions"
    for old in versions.glob("*.py"):
        old.unlink()
    down = None
    for rid, statement in STATEMENTS.items():
        body = REVISION.format(rid=f"r{rid}", down=repr(down), sql=statement)
        (versions / f"r{rid}.py").write_text(body)
        down = f"r{rid}"
    target = make_db()
    with psycopg.connect(target, autocommit=True) as conn:
        conn.execute(TARGET)  # type: ignore[arg-type]
        conn.execute("VACUUM (FREEZE, ANALYZE)")
    copy = make_db(template=scratch.dbname_of(target))
    doc = plan(
        sets.load(project, "alembic"), target, scratch_admin=pg_admin_dsn, sample_rows=SAMPLE
    ).document()
    real = _real(copy)
    billed = {r["id"]: r["statements"][0] for r in doc["revisions"]}
    for rid in ("0001", "0002"):
        line = billed[f"r{rid}"]
        assert line["wal_basis"] == "upper bound, server-wide"
        print(f"{rid}: WAL {line['wal_bytes']} vs {real[rid][0]}, "
              f"disk {line['extra_disk_bytes']} vs {real[rid][1]}")  # fmt: skip
        assert line["wal_bytes"] >= real[rid][0] / 2
        assert 0.5 <= line["extra_disk_bytes"] / real[rid][1] <= 2
