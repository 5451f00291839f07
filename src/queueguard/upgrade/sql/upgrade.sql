-- Statements of the upgrade runner (outside the revisions themselves).

-- name: try_lock
-- One upgrade runner at a time per database (session-level advisory lock).
SELECT pg_try_advisory_lock(hashtext('queueguard-upgrade'));

-- name: unlock
SELECT pg_advisory_unlock(hashtext('queueguard-upgrade'));

-- name: auto_backlog
-- Rows 004 will relocate, per legacy auto queue (read before 004 runs, for the report).
SELECT t.physical_queue, count(*)
FROM tasks t JOIN task_queues q USING (physical_queue)
WHERE q.version = 'auto'
GROUP BY t.physical_queue
ORDER BY t.physical_queue;

-- name: queue_count
SELECT count(*) FROM task_queues;
