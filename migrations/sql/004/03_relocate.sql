-- Step 2: relocate each legacy auto backlog into its default queue. Missing destinations are
-- created at range 0 (the fence in step 4 brings them to 1). Destination ids are fresh and
-- consecutive in source id order; every source row moves, payloads gain only the directive,
-- created_at is kept. The drained legacy row stays for inspection.
INSERT INTO task_queues (physical_queue, namespace, task_queue, task_type, partition, version,
                         range_id, ack_level, last_task_id)
SELECT destination, namespace, task_queue, task_type, partition, '', 0, 0, 0
FROM relocation
ON CONFLICT (physical_queue) DO NOTHING;

INSERT INTO tasks (physical_queue, task_id, data, created_at)
SELECT r.destination,
       r.base_id + row_number() OVER (PARTITION BY t.physical_queue ORDER BY t.task_id),
       jsonb_set(t.data, '{task,versionDirective}',
                 coalesce(d.directive,
                          '{"behavior": "unversioned", "deploymentVersion": null}')),
       t.created_at
FROM tasks t
JOIN relocation r ON r.source = t.physical_queue
LEFT JOIN directive d ON d.run_id = t.data -> 'task' ->> 'runId';

DELETE FROM tasks t USING relocation r WHERE t.physical_queue = r.source;

UPDATE task_queues q SET last_task_id = r.base_id + r.moved
FROM relocation r WHERE q.physical_queue = r.destination;

UPDATE task_queues q
SET last_task_id = greatest(q.last_task_id, r.source_max_id),
    ack_level = greatest(q.last_task_id, r.source_max_id)
FROM relocation r WHERE q.physical_queue = r.source;
