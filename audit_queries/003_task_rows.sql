-- check:    data.payload_shape (blocking), data.task_without_queue (blocking),
--           data.rows_at_or_below_ack (warning), data.stale_last_task_id (warning),
--           data.unknown_run (warning)
-- applies-to: 003
-- What:     in one pass over tasks: payloads that are not objects or lack task.runId or
--           task.kind (004 could not carry a directive into them); rows whose queue has no
--           metadata row (004 could not tell kept from relocated); rows at or below their
--           queue's ack_level (already handled; 004 still moves them); rows above
--           last_task_id (a stale counter: 004 repairs it); runs unknown to History (they get
--           an "unversioned" directive and History will answer obsolete).
-- Cost:     one sequential scan of tasks reading every payload, joins with task_queues and
--           executions on narrow rows (key, id, runId, a flag); memory bounded by work_mem
--           (spills to disk, never grows unbounded). About 2x a plain scan of tasks that
--           reads every payload (docs/benchmarks.md, "Preflight").
-- Locks:    ACCESS SHARE on tasks, task_queues, executions. Read-only; no row when clean.
WITH checked AS (
    -- The payload is read once, here; only narrow columns travel to the joins below
    -- (OFFSET 0 keeps the planner from postponing these expressions past the joins, which
    -- would make it sort or hash whole payloads).
    SELECT t.physical_queue, t.task_id,
           jsonb_typeof(t.data) <> 'object'
               OR jsonb_typeof(t.data -> 'task') IS DISTINCT FROM 'object'
               OR jsonb_typeof(t.data -> 'task' -> 'runId') IS DISTINCT FROM 'string'
               OR jsonb_typeof(t.data -> 'task' -> 'kind') IS DISTINCT FROM 'string'
               AS bad_payload,
           t.data -> 'task' ->> 'runId' AS run_id
    FROM tasks t
    OFFSET 0
), rows AS (
    SELECT c.physical_queue, c.task_id, code
    FROM checked c
    LEFT JOIN task_queues q ON q.physical_queue = c.physical_queue
    LEFT JOIN executions e ON e.run_id::text = c.run_id
    CROSS JOIN LATERAL unnest(ARRAY[
        CASE WHEN c.bad_payload THEN 'data.payload_shape' END,
        CASE WHEN q.physical_queue IS NULL THEN 'data.task_without_queue' END,
        CASE WHEN c.task_id <= q.ack_level THEN 'data.rows_at_or_below_ack' END,
        CASE WHEN c.task_id > q.last_task_id THEN 'data.stale_last_task_id' END,
        CASE WHEN e.run_id IS NULL THEN 'data.unknown_run' END
    ]) AS code
    -- Only rows with some finding are expanded (the same conditions as the CASEs above).
    WHERE (c.bad_payload OR q.physical_queue IS NULL OR c.task_id <= q.ack_level
           OR c.task_id > q.last_task_id OR e.run_id IS NULL)
      AND code IS NOT NULL
), findings AS (
    SELECT code, physical_queue, task_id,
           row_number() OVER (PARTITION BY code ORDER BY physical_queue, task_id) AS n
    FROM rows
)
SELECT code,
       CASE WHEN code IN ('data.payload_shape', 'data.task_without_queue')
            THEN 'blocking' ELSE 'warning' END AS severity,
       'tasks' AS object,
       count(*) AS count,
       coalesce(jsonb_agg(jsonb_build_object('queue', physical_queue, 'taskId', task_id)
                          ORDER BY n)
                FILTER (WHERE n <= coalesce(nullif(current_setting('queueguard.samples', true), ''), '10')::int),
                '[]'::jsonb) AS samples
FROM findings
GROUP BY code
ORDER BY code;
