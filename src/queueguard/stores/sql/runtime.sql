-- Statements of the protocol-4 runtime (PostgreSQL store). Every backlog write is
-- range-checked in the same statement or transaction that performs it.

-- name: load_queue
-- Take ownership: a new queue starts at range 1, an existing one increments its range.
-- `rollout`: an online rollout's record still exists (contract closed the window but may still
-- move rows written by older hosts into this queue): the owner must not trust its own counter.
-- Contract drops the record only after its last move, so `false` means nothing else appends.
INSERT INTO task_queues AS q
    (physical_queue, namespace, task_queue, task_type, partition, version,
     range_id, ack_level, last_task_id)
VALUES (%(key)s, %(namespace)s, %(task_queue)s, %(task_type)s, %(partition)s, %(version)s,
        1, 0, 0)
ON CONFLICT (physical_queue) DO UPDATE SET range_id = q.range_id + 1
RETURNING range_id, ack_level, last_task_id, to_regclass('queueguard_rollout') IS NOT NULL;

-- name: load_queue_window
-- The same during an online rollout's protocol window ([3, 4], see docs/upgrade.md): the load
-- also records the range this protocol-4 host took (protocol4_range, a column that exists only
-- during the window), so the database refuses a protocol-3 load of this queue from now on
-- (check constraint queue_owned_by_protocol_4).
INSERT INTO task_queues AS q
    (physical_queue, namespace, task_queue, task_type, partition, version,
     range_id, ack_level, last_task_id, protocol4_range)
VALUES (%(key)s, %(namespace)s, %(task_queue)s, %(task_type)s, %(partition)s, %(version)s,
        1, 0, 0, 1)
ON CONFLICT (physical_queue) DO UPDATE
    SET range_id = q.range_id + 1, protocol4_range = q.range_id + 1
RETURNING range_id, ack_level, last_task_id, true;

-- name: allocate_ids
-- Allocates n consecutive ids; matches no row when the range is stale.
UPDATE task_queues SET last_task_id = last_task_id + %(n)s
WHERE physical_queue = %(key)s AND range_id = %(range_id)s
RETURNING last_task_id;

-- name: insert_tasks
INSERT INTO tasks (physical_queue, task_id, data)
SELECT %(key)s, first_id + ord - 1, payload
FROM unnest(%(payloads)s::jsonb[]) WITH ORDINALITY AS p(payload, ord),
     (SELECT %(first_id)s::bigint AS first_id) f;

-- name: append_tasks
-- The batched append in ONE statement (one round trip in autocommit): the range-checked id
-- allocation and the insert of all n payloads (one jsonb array, in id order) commit together
-- or not at all. Returns no row when the range is stale (and then inserts nothing).
WITH allocated AS (
    UPDATE task_queues SET last_task_id = last_task_id + %(n)s
    WHERE physical_queue = %(key)s AND range_id = %(range_id)s
    RETURNING last_task_id - %(n)s AS before
), inserted AS (
    INSERT INTO tasks (physical_queue, task_id, data)
    SELECT %(key)s, a.before + p.ord, p.payload
    FROM allocated a, jsonb_array_elements(%(payloads)s::jsonb) WITH ORDINALITY AS p(payload, ord)
    RETURNING 1
)
SELECT a.before + 1 AS first_id, (SELECT count(*) FROM inserted) AS inserted FROM allocated a;

-- name: current_range
SELECT range_id FROM task_queues WHERE physical_queue = %(key)s;

-- name: read_tasks
SELECT task_id, data FROM tasks
WHERE physical_queue = %(key)s AND task_id > %(above)s
ORDER BY task_id
LIMIT %(limit)s;

-- name: checkpoint
-- Saves the ack level and deletes the handled prefix in one statement: the DELETE only
-- runs when the range-checked UPDATE matched.
WITH saved AS (
    UPDATE task_queues SET ack_level = %(ack_level)s
    WHERE physical_queue = %(key)s AND range_id = %(range_id)s
      AND %(ack_level)s BETWEEN ack_level AND last_task_id
    RETURNING physical_queue
), deleted AS (
    DELETE FROM tasks t USING saved
    WHERE t.physical_queue = saved.physical_queue AND t.task_id <= %(ack_level)s
    RETURNING 1
)
SELECT (SELECT count(*) FROM saved) AS saved, (SELECT count(*) FROM deleted) AS deleted;

-- name: queue_state
SELECT range_id, ack_level, last_task_id FROM task_queues WHERE physical_queue = %(key)s;

-- name: task_ids
SELECT task_id FROM tasks WHERE physical_queue = %(key)s ORDER BY task_id;

-- name: get_user_data
SELECT version, data FROM task_queue_user_data
WHERE namespace = %(namespace)s AND task_queue = %(task_queue)s;

-- name: insert_user_data
-- The loser of a concurrent insert conflicts on the primary key and inserts nothing.
INSERT INTO task_queue_user_data (namespace, task_queue, version, data)
VALUES (%(namespace)s, %(task_queue)s, 1, %(data)s)
ON CONFLICT (namespace, task_queue) DO NOTHING
RETURNING version;

-- name: update_user_data
UPDATE task_queue_user_data SET version = version + 1, data = %(data)s, updated_at = now()
WHERE namespace = %(namespace)s AND task_queue = %(task_queue)s AND version = %(expected)s
RETURNING version;

-- name: add_execution
INSERT INTO executions (run_id, namespace, workflow_id, status, versioning_behavior,
                        deployment_version)
VALUES (%(run_id)s, %(namespace)s, %(workflow_id)s, %(status)s, %(versioning_behavior)s,
        %(deployment_version)s);

-- name: schedule_task
INSERT INTO scheduled_tasks (run_id, scheduled_event_id, kind)
VALUES (%(run_id)s, %(scheduled_event_id)s, %(kind)s);

-- name: set_status
UPDATE executions SET status = %(status)s WHERE run_id = %(run_id)s;

-- name: version_directive
SELECT versioning_behavior, deployment_version FROM executions WHERE run_id = %(run_id)s;

-- name: record_task_started
-- Marks the start if the run is running and the task not started, or started longer than the
-- start timeout ago without a completion (NULL timeout: never; `now` NULL: the server's clock):
-- a new start, with a new started_at (the start's identity, returned). The CTE tells the three
-- answers apart in one round trip.
WITH target AS (
    SELECT s.started_at, e.status
    FROM scheduled_tasks s JOIN executions e USING (run_id)
    WHERE s.run_id = %(run_id)s AND s.scheduled_event_id = %(scheduled_event_id)s
    FOR UPDATE OF s
), started AS (
    UPDATE scheduled_tasks s SET started_at = coalesce(%(now)s::timestamptz, now())
    FROM target
    WHERE s.run_id = %(run_id)s AND s.scheduled_event_id = %(scheduled_event_id)s
      AND target.status = 'running'
      AND (target.started_at IS NULL
           OR target.started_at <= coalesce(%(now)s::timestamptz, now())
                                   - make_interval(secs => %(timeout)s::float8))
    RETURNING s.started_at
)
SELECT CASE
    WHEN EXISTS (SELECT 1 FROM started) THEN 'started'
    WHEN EXISTS (SELECT 1 FROM target WHERE status = 'running') THEN 'already-started'
    ELSE 'obsolete'
END, (SELECT started_at FROM started);

-- name: record_tasks_started
-- RecordTaskStarted for distinct (run, scheduled event) pairs in one statement: rows are
-- locked in key order (no deadlock between concurrent batches), each pair gets the answer
-- (and started_at) the single statement above would give, in input order.
WITH input AS (
    SELECT i.run_id, i.scheduled_event_id, i.ord
    FROM unnest(%(run_ids)s::uuid[], %(event_ids)s::bigint[]) WITH ORDINALITY
        AS i(run_id, scheduled_event_id, ord)
), target AS (
    SELECT s.run_id, s.scheduled_event_id, s.started_at, e.status
    FROM scheduled_tasks s JOIN executions e USING (run_id)
    WHERE (s.run_id, s.scheduled_event_id) IN (SELECT run_id, scheduled_event_id FROM input)
    ORDER BY s.run_id, s.scheduled_event_id
    FOR UPDATE OF s
), started AS (
    UPDATE scheduled_tasks s SET started_at = coalesce(%(now)s::timestamptz, now())
    FROM target t
    WHERE s.run_id = t.run_id AND s.scheduled_event_id = t.scheduled_event_id
      AND t.status = 'running'
      AND (t.started_at IS NULL
           OR t.started_at <= coalesce(%(now)s::timestamptz, now())
                              - make_interval(secs => %(timeout)s::float8))
    RETURNING s.run_id, s.scheduled_event_id, s.started_at
)
SELECT CASE
    WHEN st.run_id IS NOT NULL THEN 'started'
    WHEN t.status = 'running' THEN 'already-started'
    ELSE 'obsolete'
END, st.started_at
FROM input i
LEFT JOIN target t ON t.run_id = i.run_id AND t.scheduled_event_id = i.scheduled_event_id
LEFT JOIN started st ON st.run_id = i.run_id AND st.scheduled_event_id = i.scheduled_event_id
ORDER BY i.ord;

-- name: record_task_completed
-- RecordTaskCompleted: History forgets the task (deletes its row) when the completion names
-- its current start and the run is running; no row: obsolete.
DELETE FROM scheduled_tasks s
USING executions e
WHERE s.run_id = %(run_id)s AND s.scheduled_event_id = %(scheduled_event_id)s
  AND s.started_at = %(started_at)s::timestamptz
  AND e.run_id = s.run_id AND e.status = 'running'
RETURNING 1;

-- name: expired_starts
-- Starts of running runs older than the start timeout (none with a NULL timeout), oldest
-- first. Reads only: the timer dispatches each again, then reschedules it.
SELECT s.run_id::text, s.scheduled_event_id, s.kind, e.namespace, e.workflow_id, s.started_at,
       e.versioning_behavior, e.deployment_version
FROM scheduled_tasks s JOIN executions e USING (run_id)
WHERE e.status = 'running'
  AND s.started_at <= coalesce(%(now)s::timestamptz, now())
                      - make_interval(secs => %(timeout)s::float8)
ORDER BY s.started_at, s.run_id, s.scheduled_event_id
LIMIT %(limit)s;

-- name: reschedule_expired
-- Ends an expired start: the task is scheduled again (started_at NULL), unless it was
-- started again or completed since the timer read it (then no row matches).
UPDATE scheduled_tasks s SET started_at = NULL
FROM executions e
WHERE s.run_id = %(run_id)s AND s.scheduled_event_id = %(scheduled_event_id)s
  AND s.started_at = %(started_at)s::timestamptz
  AND s.started_at <= coalesce(%(now)s::timestamptz, now())
                      - make_interval(secs => %(timeout)s::float8)
  AND e.run_id = s.run_id AND e.status = 'running'
RETURNING 1;
