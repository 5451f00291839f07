-- check:    data.example (warning)
-- A read-only audit query in the style of audit_queries/: CTEs, a window, aggregates with
-- FILTER, catalog lookups, bounded samples from a setting.
WITH counted AS (
    SELECT q.physical_queue, count(t.task_id) AS rows,
           row_number() OVER (ORDER BY q.physical_queue) AS n
    FROM task_queues AS q
    LEFT JOIN tasks AS t ON t.physical_queue = q.physical_queue
    WHERE to_regclass('tasks') IS NOT NULL
    GROUP BY q.physical_queue
)
SELECT 'data.example' AS code,
       'warning' AS severity,
       'tasks' AS object,
       count(*) AS count,
       coalesce(jsonb_agg(jsonb_build_object('queue', physical_queue, 'rows', rows) ORDER BY n)
                FILTER (WHERE n <= coalesce(nullif(current_setting('queueguard.samples', true),
                                                   ''), '10')::int),
                '[]'::jsonb) AS samples
FROM counted
HAVING count(*) > 0;
