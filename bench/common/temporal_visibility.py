"""Temporal's `executions_visibility`, filled for the benchmarks that need it at scale: its
real files applied from a checkout of Temporal's public repository (read from there, never
copied into this repository), then rows shaped like a busy namespace's."""

from __future__ import annotations

from pathlib import Path

import psycopg

from queueguard import sets
from queueguard.engine.apply.runner import upgrade
from queueguard.pg import scratch
from queueguard.pg.scratch import ScratchDatabases

TABLE = "executions_visibility"
FILL = f"""
INSERT INTO {TABLE} (namespace_id, run_id, start_time, execution_time, workflow_id,
    workflow_type_name, status, close_time, history_length, memo, encoding, task_queue,
    search_attributes)
SELECT 'ns' || (g %% 7), md5(g::text), timestamp '2026-01-01' + g * interval '1 second',
       timestamp '2026-01-01' + g * interval '1 second', 'wf' || g, 'type' || (g %% 23), g %% 7,
       CASE WHEN g %% 3 = 0 THEN NULL ELSE timestamp '2026-02-01' + g * interval '1 second' END,
       g %% 1000, decode(md5(g::text), 'hex'), 'proto3', 'queue' || (g %% 11),
       jsonb_build_object(
           'TemporalLowCardinalityKeyword01', 'k' || (g %% 5),
           'TemporalUsedWorkerDeploymentVersions', jsonb_build_array('v' || (g %% 3)),
           'BuildIds', jsonb_build_array('b' || (g %% 9)))
FROM generate_series(%(first)s::bigint, %(last)s::bigint) g
"""


def build(admin: str, databases: ScratchDatabases, folder: Path, start: str, rows: int) -> str:
    mset = sets.load(folder)
    dsn = databases.create()
    upgrade(mset, dsn, to=start)
    with psycopg.connect(dsn, autocommit=True) as conn:
        step = 200_000
        for first in range(1, rows + 1, step):
            conn.execute(FILL, {"first": first, "last": min(rows, first + step - 1)})
        conn.execute("VACUUM ANALYZE")
    return scratch.dbname_of(dsn)
