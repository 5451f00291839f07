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
-- Cost:     one sequential scan of tasks reading every payload (the only pass over tasks
--           when auditing a 003 database: every per-row check shares it), hash joins with
--           task_queues and executions on narrow rows (key, id, runId, a flag); memory bounded
--           by work_mem (spills to disk, never grows unbounded). Rows with a finding are read
--           again by their tuple id. About as long as one plain scan of tasks reading every
--           payload (docs/benchmarks.md, "Preflight").
-- Locks:    ACCESS SHARE on tasks, task_queues, executions. Read-only; no row when clean.
WITH checked AS (
    -- The one pass over tasks. The payload is read once, here; only narrow columns travel to
    -- the joins below (OFFSET 0 keeps the planner from postponing these expressions past the
    -- joins, which would make it sort or hash whole payloads). Of the payload check, only
    -- task.kind's type is taken on every row: -> and ->> give NULL unless payload and task
    -- are objects, and a text that equals a run's id (join below) is only ever a JSON
    -- string's, so a runId naming a run proves the rest. Rows whose runId names no run are
    -- read again for the whole check (`payload` below); on a clean database there are none.
    SELECT t.tableoid AS relation, t.ctid AS row_id, t.physical_queue, t.task_id,
           t.data -> 'task' ->> 'runId' AS run_id,
           jsonb_typeof(t.data -> 'task' -> 'kind') IS DISTINCT FROM 'string' AS bad_kind
    FROM tasks t
    OFFSET 0
), flagged AS (
    -- Every row goes through both hash joins; only rows with some finding come out.
    SELECT c.relation, c.row_id, c.physical_queue, c.task_id, c.bad_kind,
           q.physical_queue IS NULL AS without_queue,
           c.task_id <= q.ack_level AS at_or_below_ack,
           c.task_id > q.last_task_id AS above_last_task_id,
           e.run_id IS NULL AS unknown_run
    FROM checked c
    LEFT JOIN task_queues q ON q.physical_queue = c.physical_queue
    -- One row per run: run_id is executions' key, so DISTINCT removes nothing, but it tells
    -- the planner that the text form is unique. Without it the planner has no statistics
    -- for run_id::text, prices a hash join as if each probe met a tenth of executions, and
    -- sorts every task row by runId for a merge join instead (sorts spilled to disk).
    LEFT JOIN (SELECT DISTINCT run_id::text AS run_id FROM executions) e ON e.run_id = c.run_id
    WHERE c.bad_kind OR q.physical_queue IS NULL OR c.task_id <= q.ack_level
       OR c.task_id > q.last_task_id OR e.run_id IS NULL
), payload AS (
    -- The whole payload check, for rows whose runId names no run: their row again, by tuple
    -- id, in this statement's snapshot (the same row version the scan read).
    SELECT f.*,
           CASE WHEN NOT f.unknown_run THEN f.bad_kind
                ELSE (SELECT jsonb_typeof(t.data) <> 'object'
                                 OR jsonb_typeof(t.data -> 'task') IS DISTINCT FROM 'object'
                                 OR jsonb_typeof(t.data -> 'task' -> 'runId')
                                    IS DISTINCT FROM 'string'
                                 OR jsonb_typeof(t.data -> 'task' -> 'kind')
                                    IS DISTINCT FROM 'string'
                      FROM tasks t
                      WHERE t.ctid = f.row_id AND t.tableoid = f.relation)
           END AS bad_payload
    FROM flagged f
), rows AS (
    SELECT p.physical_queue, p.task_id, code
    FROM payload p
    CROSS JOIN LATERAL unnest(ARRAY[
        CASE WHEN p.bad_payload THEN 'data.payload_shape' END,
        CASE WHEN p.without_queue THEN 'data.task_without_queue' END,
        CASE WHEN p.at_or_below_ack THEN 'data.rows_at_or_below_ack' END,
        CASE WHEN p.above_last_task_id THEN 'data.stale_last_task_id' END,
        CASE WHEN p.unknown_run THEN 'data.unknown_run' END
    ]) AS code
    WHERE code IS NOT NULL
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
