-- check:    estimate.vacuum_analyze (info)
-- applies-to: 003
-- guard:    no (advisory: preflight only)
-- What:     the maintenance to run right after migration 004: it leaves one dead row version
--           per task row (every row is rewritten, relocated rows are moved) and per queue row
--           (the fence), and changes every payload, so the planner statistics are stale.
--           Run `VACUUM (ANALYZE) tasks; VACUUM (ANALYZE) task_queues;` after the upgrade
--           (autovacuum would get there, later). The samples show what each table holds and
--           when it was last vacuumed and analyzed (rows from the planner statistics, else
--           from the activity counters).
-- Cost:     reads pg_stat_all_tables and pg_class (statistics views; no table is read).
-- Locks:    none on any table. Read-only; always returns its row.
WITH stats AS (
    SELECT c.relname::text AS tbl,
           CASE WHEN c.reltuples >= 0 THEN c.reltuples::bigint
                ELSE coalesce(s.n_live_tup, 0) END AS rows,
           s.n_dead_tup,
           greatest(s.last_vacuum, s.last_autovacuum) AS last_vacuumed,
           greatest(s.last_analyze, s.last_autoanalyze) AS last_analyzed
    FROM pg_class AS c
    LEFT JOIN pg_stat_all_tables AS s ON s.relid = c.oid
    WHERE c.oid IN (to_regclass('tasks'), to_regclass('task_queues'))
)
SELECT 'estimate.vacuum_analyze' AS code,
       'info' AS severity,
       'tasks' AS object,
       coalesce(sum(rows), 0)::bigint AS count,
       coalesce(jsonb_agg(jsonb_build_object('run', format('VACUUM (ANALYZE) %I;', tbl),
                                             'estimatedRows', rows,
                                             'deadRowsNow', n_dead_tup,
                                             'lastVacuumed', last_vacuumed,
                                             'lastAnalyzed', last_analyzed) ORDER BY tbl DESC),
                '[]'::jsonb) AS samples
FROM stats;
