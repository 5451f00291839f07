-- check:    data.directive_missing (blocking), data.auto_backlog (blocking),
--           data.counter_below_rows (blocking), data.ack_above_counter (blocking)
-- applies-to: 004
-- What:     the queue state revision 004 guarantees, and the next revision relies on: every
--           task row carries its version directive (data.task.versionDirective, an object
--           with a behavior); no task row is left in a legacy @auto queue; every queue's
--           last_task_id is at least its highest stored task id (ids are never reused); and
--           ack_level never exceeds last_task_id. `queueguard verify` also runs it on every
--           upgraded fixture, so a migration that breaks one of these fails verify.
-- Cost:     one sequential scan of tasks reading the payload's directive, joined with
--           task_queues on narrow rows; memory bounded by work_mem.
-- Locks:    ACCESS SHARE on tasks and task_queues. Read-only; no row when clean.
WITH per_queue AS (
    SELECT t.physical_queue,
           max(t.task_id) AS max_id,
           count(*) FILTER (WHERE jsonb_typeof(t.data -> 'task' -> 'versionDirective')
                                  IS DISTINCT FROM 'object'
                               OR jsonb_typeof(t.data -> 'task' -> 'versionDirective'
                                               -> 'behavior') IS DISTINCT FROM 'string')
               AS without_directive,
           count(*) AS task_rows
    FROM tasks t
    GROUP BY t.physical_queue
), problems AS (
    SELECT 'data.directive_missing' AS code, p.physical_queue AS queue,
           p.without_directive AS rows
    FROM per_queue p
    WHERE p.without_directive > 0
    UNION ALL
    SELECT 'data.auto_backlog', p.physical_queue, p.task_rows
    FROM per_queue p
    JOIN task_queues q ON q.physical_queue = p.physical_queue
    WHERE q.version = 'auto'
    UNION ALL
    SELECT 'data.counter_below_rows', p.physical_queue, 1
    FROM per_queue p
    JOIN task_queues q ON q.physical_queue = p.physical_queue
    WHERE q.last_task_id < p.max_id
    UNION ALL
    SELECT 'data.ack_above_counter', q.physical_queue, 1
    FROM task_queues q
    WHERE q.ack_level > q.last_task_id
), numbered AS (
    SELECT p.*, row_number() OVER (PARTITION BY p.code ORDER BY p.queue) AS n
    FROM problems p
)
SELECT code,
       'blocking' AS severity,
       'tasks' AS object,
       sum(rows)::bigint AS count,
       coalesce(jsonb_agg(jsonb_build_object('queue', queue, 'rows', rows) ORDER BY n)
                FILTER (WHERE n <= coalesce(nullif(current_setting('queueguard.samples', true),
                                                   ''), '10')::int),
                '[]'::jsonb) AS samples
FROM numbered
GROUP BY code
ORDER BY code;
