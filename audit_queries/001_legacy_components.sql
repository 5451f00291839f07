-- check:    data.legacy_components_invalid (blocking)
-- applies-to: 001 002
-- What:     v0.1/v0.2 spool rows whose namespace, task queue, type, partition and version
--           cannot form a valid physical queue key (empty name, negative partition, a version
--           that is neither '', 'auto' nor dotted). Migration 003 refuses such a database.
-- Cost:     one sequential scan of tasks (no payload is read).
-- Locks:    ACCESS SHARE on tasks. Read-only; returns no row when clean.
WITH bad AS (
    SELECT delivery_id, namespace, task_queue, task_type, partition, version
    FROM tasks
    WHERE namespace = '' OR task_queue = '' OR partition < 0
       OR task_type NOT IN ('workflow', 'activity')
       OR NOT (version = '' OR version = 'auto' OR strpos(version, '.') > 0)
)
SELECT 'data.legacy_components_invalid' AS code,
       'blocking' AS severity,
       'tasks' AS object,
       count(*) AS count,
       coalesce((SELECT jsonb_agg(to_jsonb(s)) FROM (
           SELECT * FROM bad ORDER BY delivery_id
           LIMIT coalesce(nullif(current_setting('queueguard.samples', true), ''), '10')::int
       ) s), '[]'::jsonb) AS samples
FROM bad
HAVING count(*) > 0;
