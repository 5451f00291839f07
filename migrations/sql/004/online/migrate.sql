-- 004 online, phase migrate: the data work in bounded batches, each its own transaction
-- under the rollout's lock_timeout, taken after the migrator's lease (which it re-checks).
-- Contract runs the same batches once more after closing the window. Every statement here
-- touches at most one batch of rows or queues.

-- name: repair_counters
-- Stale counters (a legacy last_task_id below the highest stored id), one keyset batch of
-- queues at a time: each queue's highest id comes from the primary key. Counters only grow,
-- so a host appending meanwhile is never hurt; the row lock orders it with their appends.
WITH batch AS (
    SELECT q.physical_queue, m.max_id
    FROM task_queues q
    CROSS JOIN LATERAL (SELECT max(t.task_id) AS max_id FROM tasks t
                        WHERE t.physical_queue = q.physical_queue) m
    WHERE q.physical_queue > %(after)s
    ORDER BY q.physical_queue
    LIMIT %(limit)s
), repaired AS (
    UPDATE task_queues q SET last_task_id = b.max_id
    FROM batch b
    WHERE q.physical_queue = b.physical_queue AND b.max_id > q.last_task_id
    RETURNING 1
)
SELECT (SELECT max(physical_queue) FROM batch), (SELECT count(*) FROM batch),
       (SELECT count(*) FROM repaired);

-- name: auto_queues
-- Legacy @auto queues that hold rows, in key order.
SELECT q.physical_queue,
       left(q.physical_queue, length(q.physical_queue) - length('@auto')) AS destination
FROM task_queues q
WHERE q.version = 'auto'
  AND EXISTS (SELECT 1 FROM tasks t WHERE t.physical_queue = q.physical_queue)
ORDER BY q.physical_queue;

-- name: lock_source
-- The source's metadata row, locked for this batch: its owner's appends and checkpoints wait.
SELECT range_id, namespace, task_queue, task_type, partition
FROM task_queues WHERE physical_queue = %(source)s
FOR UPDATE;

-- name: fence_source
-- Fence first: a v0.3 owner of the source fails its next append or checkpoint with a range
-- conflict (and unloads) instead of an out-of-bounds ack level once its rows are gone.
UPDATE task_queues SET range_id = range_id + 1, protocol4_range = NULL
WHERE physical_queue = %(source)s
RETURNING range_id;

-- name: ensure_destination
-- A missing default queue is created as offline 004 creates it (range 0; contract fences it).
INSERT INTO task_queues (physical_queue, namespace, task_queue, task_type, partition, version,
                         range_id, ack_level, last_task_id)
VALUES (%(destination)s, %(namespace)s, %(task_queue)s, %(task_type)s, %(partition)s, '',
        0, 0, 0)
ON CONFLICT (physical_queue) DO NOTHING;

-- name: lock_destination
SELECT range_id FROM task_queues WHERE physical_queue = %(destination)s FOR UPDATE;

-- name: move_batch
-- One move: DELETE … RETURNING the source's first rows in id order → fresh destination ids
-- from the range-checked counter update (never from max(task_id)) → INSERT with the version
-- directive, created_at kept. One statement; the caller rolls back unless inserted = moved.
WITH moved AS (
    DELETE FROM tasks t
    WHERE t.physical_queue = %(source)s
      AND t.task_id IN (SELECT s.task_id FROM tasks s WHERE s.physical_queue = %(source)s
                        ORDER BY s.task_id LIMIT %(limit)s)
    RETURNING t.task_id, t.data, t.created_at
), allocated AS (
    UPDATE task_queues SET last_task_id = last_task_id + (SELECT count(*) FROM moved)
    WHERE physical_queue = %(destination)s AND range_id = %(destination_range)s
    RETURNING last_task_id - (SELECT count(*) FROM moved) AS base
), numbered AS (
    SELECT m.data, m.created_at, row_number() OVER (ORDER BY m.task_id) AS ord,
           m.data -> 'task' ->> 'runId' AS run_id
    FROM moved m
), inserted AS (
    INSERT INTO tasks (physical_queue, task_id, data, created_at)
    SELECT %(destination)s, a.base + n.ord,
           jsonb_set(n.data, '{task,versionDirective}',
                     CASE WHEN e.run_id IS NULL
                          THEN '{"behavior": "unversioned", "deploymentVersion": null}'
                          ELSE jsonb_build_object('behavior', e.versioning_behavior,
                                                  'deploymentVersion', e.deployment_version)
                     END),
           n.created_at
    FROM numbered n
    CROSS JOIN allocated a
    LEFT JOIN executions e
           ON n.run_id ~ '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$'
          AND e.run_id = CAST(CASE WHEN n.run_id ~ '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$'
                                   THEN n.run_id END AS uuid)
    RETURNING 1
)
SELECT (SELECT count(*) FROM moved), (SELECT max(task_id) FROM moved),
       (SELECT count(*) FROM inserted);

-- name: drain_source
-- The source's counters after a move: ids up to the highest moved one are gone; once it is
-- empty it is drained as offline 004 leaves it (ack_level = last_task_id).
UPDATE task_queues q
SET last_task_id = greatest(q.last_task_id, %(moved_max)s),
    ack_level = CASE
        WHEN EXISTS (SELECT 1 FROM tasks t WHERE t.physical_queue = q.physical_queue)
        THEN greatest(q.ack_level, least(%(moved_max)s, q.last_task_id))
        ELSE greatest(q.last_task_id, %(moved_max)s)
    END
WHERE q.physical_queue = %(source)s;

-- name: directive_batch
-- One keyset batch of the marker index: rows of non-@auto queues without their directive get
-- History's (offline 004's rule: a run unknown to History, or a runId that is not a uuid in
-- its text form, gets "unversioned"). Rows are locked in key order, as a checkpoint's DELETE
-- locks them, so the two never deadlock.
WITH batch AS (
    SELECT t.physical_queue, t.task_id, t.data -> 'task' ->> 'runId' AS run_id
    FROM tasks t
    WHERE jsonb_typeof(t.data -> 'task') = 'object' AND NOT (t.data -> 'task' ? 'versionDirective')
      AND (t.physical_queue, t.task_id) > (%(after_queue)s, %(after_id)s)
      AND right(t.physical_queue, 5) <> '@auto'
    ORDER BY t.physical_queue, t.task_id
    LIMIT %(limit)s
    FOR UPDATE OF t
), updated AS (
    UPDATE tasks t
    SET data = jsonb_set(t.data, '{task,versionDirective}',
                         CASE WHEN e.run_id IS NULL
                              THEN '{"behavior": "unversioned", "deploymentVersion": null}'
                              ELSE jsonb_build_object('behavior', e.versioning_behavior,
                                                      'deploymentVersion', e.deployment_version)
                         END)
    FROM batch b
    LEFT JOIN executions e
           ON b.run_id ~ '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$'
          AND e.run_id = CAST(CASE WHEN b.run_id ~ '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$'
                                   THEN b.run_id END AS uuid)
    WHERE t.physical_queue = b.physical_queue AND t.task_id = b.task_id
    RETURNING 1
)
-- (rows seen, rows updated, the batch's last key: where the next batch starts)
SELECT (SELECT count(*) FROM batch), (SELECT count(*) FROM updated),
       (SELECT physical_queue FROM batch ORDER BY physical_queue DESC, task_id DESC LIMIT 1),
       (SELECT task_id FROM batch ORDER BY physical_queue DESC, task_id DESC LIMIT 1);

-- name: remaining
-- What is left to migrate: rows without their directive (through the marker index) and rows
-- in @auto queues.
SELECT
    (SELECT count(*) FROM tasks t
     WHERE jsonb_typeof(t.data -> 'task') = 'object'
       AND NOT (t.data -> 'task' ? 'versionDirective')
       AND right(t.physical_queue, 5) <> '@auto') AS directives,
    (SELECT count(*) FROM tasks t JOIN task_queues q USING (physical_queue)
     WHERE q.version = 'auto') AS relocations;
