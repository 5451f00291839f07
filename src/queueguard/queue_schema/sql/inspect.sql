-- Read-only statements of `queueguard status` and `queueguard inspect`.

-- name: queue_summary
SELECT count(*) AS queues,
       coalesce(sum(range_id), 0) AS ranges,
       count(*) FILTER (WHERE version = 'auto') AS legacy_auto_queues
FROM task_queues;

-- name: task_count
SELECT count(*) FROM tasks;

-- name: ledger
SELECT revision, sha256 FROM queueguard_migrations ORDER BY revision;

-- name: workflow_tasks
SELECT physical_queue, task_id, data -> 'task' ->> 'runId' AS run_id,
       data -> 'task' ->> 'kind' AS kind,
       data -> 'task' -> 'versionDirective' AS version_directive
FROM tasks
WHERE data -> 'task' ->> 'workflowId' = %(workflow_id)s
  AND (%(namespace)s::text IS NULL OR data -> 'task' ->> 'namespace' = %(namespace)s::text)
ORDER BY physical_queue, task_id;

-- name: workflow_queues
SELECT q.physical_queue, q.range_id, q.ack_level, q.last_task_id,
       count(t.task_id) AS stored_task_rows
FROM task_queues q
LEFT JOIN tasks t USING (physical_queue)
WHERE q.physical_queue = ANY(%(queues)s)
GROUP BY q.physical_queue
ORDER BY q.physical_queue;
