-- Step 3: repair stale counters: every queue's last_task_id becomes at least its highest
-- stored task id.
UPDATE task_queues q SET last_task_id = m.max_id
FROM (SELECT physical_queue, max(task_id) AS max_id FROM tasks GROUP BY physical_queue) m
WHERE q.physical_queue = m.physical_queue AND m.max_id > q.last_task_id;
