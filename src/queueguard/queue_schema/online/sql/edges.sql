-- The edge cases verify's online check adds to each fixture before comparing the online path
-- with offline 004 (queueguard.queue_schema.online.edges). v0.3 shapes, written as a v0.3 host and
-- History would have written them.

-- name: queue
INSERT INTO task_queues (physical_queue, namespace, task_queue, task_type, partition, version,
                         range_id, ack_level, last_task_id)
VALUES (%(key)s, %(namespace)s, %(task_queue)s, %(task_type)s, %(partition)s, %(version)s,
        %(range_id)s, %(ack_level)s, %(last_task_id)s);

-- name: task
INSERT INTO tasks (physical_queue, task_id, data, created_at)
VALUES (%(key)s, %(task_id)s, %(data)s,
        '2026-01-01 00:00:00+00'::timestamptz + %(task_id)s * interval '1 second');

-- name: execution
INSERT INTO executions (run_id, namespace, workflow_id, status, versioning_behavior,
                        deployment_version)
VALUES (%(run_id)s, %(namespace)s, %(workflow_id)s, 'running', %(behavior)s, %(deployment)s);

-- name: auto_sources
-- The legacy @auto queues that hold rows (each ends one fence higher online than offline).
SELECT DISTINCT t.physical_queue FROM tasks t JOIN task_queues q USING (physical_queue)
WHERE q.version = 'auto';

-- name: work
-- What the online path has to do on a quiescent input: stale counters, rows in legacy @auto
-- queues, other rows without their directive.
SELECT (SELECT count(*) FROM task_queues q
        WHERE q.last_task_id < (SELECT max(task_id) FROM tasks t
                                WHERE t.physical_queue = q.physical_queue)),
       (SELECT count(*) FROM tasks t JOIN task_queues q USING (physical_queue)
        WHERE q.version = 'auto'),
       (SELECT count(*) FROM tasks t JOIN task_queues q USING (physical_queue)
        WHERE q.version <> 'auto' AND NOT (t.data -> 'task' ? 'versionDirective'));

-- name: sources_now
-- Between two batches (verify's probe): each legacy @auto queue's counters and the ids
-- still in it.
SELECT q.physical_queue, q.ack_level, q.last_task_id,
       coalesce(array_agg(t.task_id ORDER BY t.task_id) FILTER (WHERE t.task_id IS NOT NULL),
                '{}')
FROM task_queues q
LEFT JOIN tasks t ON t.physical_queue = q.physical_queue
WHERE q.version = 'auto'
GROUP BY q.physical_queue, q.ack_level, q.last_task_id
ORDER BY q.physical_queue;

-- name: auto_rows_with_directive
-- Rows of legacy @auto queues that carry a version directive (only a move gives one).
SELECT t.physical_queue, t.task_id FROM tasks t
JOIN task_queues q ON q.physical_queue = t.physical_queue
WHERE q.version = 'auto' AND t.data -> 'task' ? 'versionDirective'
ORDER BY 1, 2 LIMIT 5;
