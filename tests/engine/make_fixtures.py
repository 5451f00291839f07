"""Writes tests/engine/fixtures/: databases of the test Temporal set (tests/sets/data/temporal)
frozen at an older version, as `verify --fixtures` reads them.

    python tests/engine/make_fixtures.py          # (re)write the files
    python tests/engine/make_fixtures.py --check  # exit 1 if a file differs from its source

Each fixture is made the way a real one would be: an empty scratch database brought to the
version by `upgrade` (the engine's runner, Temporal's own bookkeeping), rows written at that
version, then `pg_dump` (plain SQL). What would differ from run to run is fixed first: the
database's name in schema_version (as if the tool's `--db` had been `kennels`), the
bookkeeping's timestamps, pg_dump's version lines and its `\\restrict` key. The embedded
server's pg_dump writes the files.
"""

from __future__ import annotations

import sys
from pathlib import Path

import psycopg

from queueguard import sets
from queueguard.engine.apply.runner import upgrade
from queueguard.pg import scratch, tools

HERE = Path(__file__).parent
TEMPORAL = HERE.parent / "sets" / "data" / "temporal"
FIXTURES = HERE / "fixtures"

#: at 0.2: two kennels, three dogs (one without a walk), four walks
TWO_KENNELS = """
INSERT INTO kennels (kennel_id, name) VALUES (1, 'north'), (2, 'south');
INSERT INTO dogs (kennel_id, dog_id, name, born) VALUES
  (1, 1, 'Rex', '2019-04-01'), (1, 2, 'Bella', NULL), (2, 1, 'Fido', '2021-11-30');
INSERT INTO walks (kennel_id, dog_id, started_at, minutes) VALUES
  (1, 1, '2024-03-01 08:00', 30), (1, 1, '2024-03-01 18:00', 45),
  (1, 2, '2024-03-02 09:30', 20), (2, 1, '2024-03-02 07:15', 60);
"""

#: what the runner and the server's clock wrote, made the same on every run
STEADY_BOOKKEEPING = """
UPDATE schema_version SET db_name = 'kennels', creation_time = '2024-03-01 00:00:00';
WITH ordered AS (
  SELECT update_time, row_number() OVER (ORDER BY update_time) AS n FROM schema_update_history
)
UPDATE schema_update_history h
SET update_time = timestamp '2024-03-01 00:00:00' + o.n * interval '1 minute',
    year = 2024, month = 3
FROM ordered o WHERE h.update_time = o.update_time;
"""

FIXTURE_SETS = {"0.2--two-kennels.sql": ("0.2", TWO_KENNELS)}


def dump(name: str, admin_dsn: str) -> str:
    """The fixture `name` as pg_dump writes it."""
    version, rows = FIXTURE_SETS[name]
    with scratch.ScratchDatabases(admin_dsn, prefix="qgfixture") as databases:
        dsn = databases.create()
        upgrade(sets.load(TEMPORAL), dsn, to=version)
        with psycopg.connect(dsn) as conn:
            conn.execute(rows)
            conn.execute(STEADY_BOOKKEEPING)
        done = tools.run(
            "pg_dump",
            dsn,
            ["--no-owner", "--no-privileges", "--restrict-key=queueguardfixture"],
        )
        if done.returncode != 0:
            raise SystemExit(f"pg_dump failed: {done.stderr.decode(errors='replace')}")
    lines = done.stdout.decode().splitlines(keepends=True)
    return "".join(
        line for line in lines if not line.startswith(("-- Dumped from", "-- Dumped by"))
    )


def main(argv: list[str]) -> int:
    check = "--check" in argv
    admin = scratch.server_dsn()
    FIXTURES.mkdir(exist_ok=True)
    stale = []
    for name in FIXTURE_SETS:
        text = dump(name, admin)
        path = FIXTURES / name
        if check:
            if not path.is_file() or path.read_text() != text:
                stale.append(name)
        else:
            path.write_text(text)
    for name in stale:
        print(f"{name} differs from what make_fixtures.py writes", file=sys.stderr)
    return 1 if stale else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
