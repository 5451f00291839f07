-- Whole-database state as a snapshot document, and loading a document back
-- (`queueguard snapshot export|import`, golden fixture states, verify).

-- name: queues
SELECT physical_queue, range_id, ack_level, last_task_id FROM task_queues ORDER BY physical_queue;

-- name: tasks
SELECT physical_queue, task_id, data FROM tasks ORDER BY physical_queue, task_id;

-- name: user_data
SELECT namespace, task_queue, version, data FROM task_queue_user_data
ORDER BY namespace, task_queue;

-- name: executions
SELECT run_id::text, namespace, workflow_id, status, versioning_behavior, deployment_version
FROM executions ORDER BY run_id::text;

-- name: scheduled_tasks
SELECT run_id::text, scheduled_event_id, kind,
       to_char(started_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')
FROM scheduled_tasks ORDER BY run_id::text, scheduled_event_id;

-- name: protocol
SELECT min_protocol, max_protocol FROM runtime_protocol;

-- name: is_empty
SELECT NOT EXISTS (SELECT 1 FROM task_queues) AND NOT EXISTS (SELECT 1 FROM tasks)
   AND NOT EXISTS (SELECT 1 FROM task_queue_user_data) AND NOT EXISTS (SELECT 1 FROM executions);

-- name: copy_queues
COPY task_queues (physical_queue, namespace, task_queue, task_type, partition, version,
                  range_id, ack_level, last_task_id) FROM STDIN;

-- name: copy_tasks
COPY tasks (physical_queue, task_id, data) FROM STDIN;

-- name: copy_user_data
COPY task_queue_user_data (namespace, task_queue, version, data) FROM STDIN;

-- name: copy_executions
COPY executions (run_id, namespace, workflow_id, status, versioning_behavior,
                 deployment_version) FROM STDIN;

-- name: copy_scheduled_tasks
COPY scheduled_tasks (run_id, scheduled_event_id, kind, started_at) FROM STDIN;

-- name: set_protocol
UPDATE runtime_protocol SET min_protocol = %(min)s, max_protocol = %(max)s;
