"""`upgrade --online` of a Temporal-format set of our own (a table shaped like Temporal's
executions_visibility: composite key, JSONB search attributes, stored generated columns added
in one ALTER TABLE) from every intermediate version: the end state equals the plain upgrade's
— a line-identical schema dump, equal rows, and Temporal's own bookkeeping (schema_version,
schema_update_history) as the plain upgrade writes it."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import psycopg
import pytest

from queueguard import sets
from queueguard.engine.apply.runner import upgrade
from queueguard.engine.online import choose, proof
from queueguard.engine.online.upgrade import upgrade_online

DATA = Path(__file__).parent / "data" / "temporal"
FILL = """
INSERT INTO namespaces SELECT 'ns' || g, 'namespace ' || g FROM generate_series(1, 5) g;
INSERT INTO visits
SELECT 'ns' || (1 + g % 5), 'run' || g, timestamp '2026-01-01' + g * interval '1 minute',
       g % 4, jsonb_build_object('TaskQueue', 'q' || g % 13, 'BuildIds', jsonb_build_array(g)),
       CASE WHEN g % 3 = 0 THEN NULL ELSE decode(md5(g::text), 'hex') END
FROM generate_series(1, 3000) g;
"""


def _at(make_db: Callable[..., str], mset: sets.MigrationSet, version: str) -> str:
    dsn = make_db()
    upgrade(mset, dsn, to=version)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(FILL)
    return dsn


@pytest.mark.parametrize("start", ["1.0", "1.1", "1.2"])
def test_online_from_every_version_equals_the_plain_upgrade(
    make_db: Callable[..., str], start: str
) -> None:
    mset = sets.load(DATA)
    plain, online = _at(make_db, mset, start), _at(make_db, mset, start)
    upgrade(mset, plain)
    result = upgrade_online(mset, online, budget_ms=0.0, sample_rows=500)
    assert result.report is not None and result.report.after == "1.3"
    kinds = {f.kind for d in result.decisions for f in d.forms or ()}
    assert choose.REBUILD in kinds  # 1.3's TYPE change rewrites visits
    assert proof.dump_differences(proof.schema_dump(plain), proof.schema_dump(online)) == []
    assert proof.row_differences(plain, online, bookkeeping=mset.bookkeeping) == []
