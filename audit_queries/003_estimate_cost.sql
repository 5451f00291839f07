-- check:    estimate.rows_rewritten (info), estimate.rows_relocated (info),
--           estimate.extra_disk (info), estimate.wal (info), estimate.lock_hold (info)
-- applies-to: 003
-- guard:    no (advisory: preflight only)
-- What:     what migration 004 will cost on this database: the rows it rewrites (every task
--           row gains its version directive), the rows it relocates out of legacy @auto
--           queues (per queue), the extra disk the new row versions take until VACUUM (heap
--           and index), the WAL it writes, and how long it holds ACCESS EXCLUSIVE on
--           task_queues, tasks and runtime_protocol. Row counts come from the planner
--           statistics (pg_class.reltuples) when tasks has been analyzed, else from a count;
--           relocated rows are counted exactly through the tasks primary key. Factors and
--           the rewrite rate were measured by bench/preflight/benchmark.py (docs/benchmarks.md);
--           queueguard.rewrite_rows_per_s overrides the rate with one measured on your
--           hardware (e.g. by `queueguard rehearse` on a copy).
-- Cost:     catalog lookups, an index range scan per legacy @auto queue (rows it holds), and
--           a count of tasks only if it was never analyzed (no payload is read).
-- Locks:    ACCESS SHARE on tasks and task_queues (relation sizes and the relocated count).
--           Read-only; always returns its rows.
WITH tasks_stats AS (
    SELECT c.reltuples, pg_table_size(c.oid) AS table_bytes,
           pg_indexes_size(c.oid) AS index_bytes,
           greatest(s.last_analyze, s.last_autoanalyze) AS last_analyzed
    FROM pg_class AS c
    LEFT JOIN pg_stat_all_tables AS s ON s.relid = c.oid
    WHERE c.oid = to_regclass('tasks')
), total AS (
    SELECT CASE WHEN reltuples >= 0 THEN reltuples::bigint
                ELSE (SELECT count(*) FROM tasks) END AS rows,
           CASE WHEN reltuples >= 0 THEN 'statistics' ELSE 'count' END AS basis,
           table_bytes, index_bytes, last_analyzed
    FROM tasks_stats
), relocated AS (
    SELECT q.physical_queue AS queue,
           left(q.physical_queue, length(q.physical_queue) - length('@auto')) AS destination,
           count(*) AS rows
    FROM task_queues AS q
    JOIN tasks AS t ON t.physical_queue = q.physical_queue
    WHERE q.version = 'auto'
    GROUP BY q.physical_queue
), moved AS (
    SELECT coalesce(sum(rows), 0)::bigint AS rows,
           coalesce(jsonb_agg(jsonb_build_object('queue', queue, 'destination', destination,
                                                 'rows', rows) ORDER BY queue)
                    FILTER (WHERE n <= coalesce(nullif(current_setting('queueguard.samples',
                                                                       true), ''), '10')::int),
                    '[]'::jsonb) AS samples
    FROM (SELECT r.*, row_number() OVER (ORDER BY r.queue) AS n FROM relocated AS r) AS r
), cost AS (
    -- Disk: every row gets a new version (~70 more bytes for the directive) and, the update
    -- not being HOT on full pages, a new primary-key entry: about one more copy of heap and
    -- index until VACUUM (measured: +424 MB for an estimated 483 MB at 1M rows).
    -- WAL: the new versions plus full-page images, repeated after every checkpoint during the
    -- run (data checksums make even hint bits log a page): measured 16x heap + index at 1M
    -- rows with max_wal_size = 1GB; fewer checkpoints (a larger max_wal_size) write less.
    -- Hold: 004 runs in one transaction at ~35,000 rows/s (rewritten + relocated) measured.
    SELECT t.*, m.rows AS moved_rows, m.samples AS moved_samples,
           (t.table_bytes + t.index_bytes + 70 * t.rows)::bigint AS extra_bytes,
           (16 * (t.table_bytes + t.index_bytes))::bigint AS wal_bytes,
           coalesce(nullif(current_setting('queueguard.rewrite_rows_per_s', true), ''),
                    '35000')::float8 AS rows_per_s
    FROM total AS t, moved AS m
)
SELECT 'estimate.rows_rewritten' AS code, 'info' AS severity, 'tasks' AS object,
       rows AS count,
       jsonb_build_array(jsonb_build_object('rows', rows, 'basis', basis,
                                            'lastAnalyzed', last_analyzed)) AS samples
FROM cost
UNION ALL
SELECT 'estimate.rows_relocated', 'info', 'tasks', moved_rows, moved_samples
FROM cost
UNION ALL
SELECT 'estimate.extra_disk', 'info', 'tasks', rows,
       jsonb_build_array(jsonb_build_object('bytes', extra_bytes,
                                            'pretty', pg_size_pretty(extra_bytes),
                                            'tableBytes', table_bytes,
                                            'indexBytes', index_bytes))
FROM cost
UNION ALL
SELECT 'estimate.wal', 'info', 'tasks', rows,
       jsonb_build_array(jsonb_build_object('bytes', wal_bytes,
                                            'pretty', pg_size_pretty(wal_bytes),
                                            'maxWalSize', current_setting('max_wal_size')))
FROM cost
UNION ALL
SELECT 'estimate.lock_hold', 'info', 'tasks', rows,
       jsonb_build_array(jsonb_build_object(
           'seconds', round((0.5 + (rows + moved_rows) / rows_per_s)::numeric, 1),
           'rowsPerSecond', rows_per_s,
           'locks', current_setting('queueguard.lock_budget')::jsonb,
           'lock', 'ACCESS EXCLUSIVE',
           'tables', (SELECT coalesce(jsonb_agg(b.key ORDER BY b.key), '[]'::jsonb)
                      FROM jsonb_each_text(current_setting('queueguard.lock_budget')::jsonb) AS b
                      WHERE b.value = 'ACCESS EXCLUSIVE')))
FROM cost;
