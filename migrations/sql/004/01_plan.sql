-- Step 0: the plan, in temporary tables dropped at commit (nothing remains in the catalog).
-- lint-allow squawk.require-lock-timeout: set by steps.apply (SET LOCAL) before step 00
-- lint-allow squawk.require-statement-timeout: set by steps.apply (SET LOCAL) before step 00
-- directive: History's version directive per run id, in the text form tasks carry.
CREATE TEMP TABLE directive ON COMMIT DROP AS
SELECT run_id::text AS run_id,
       jsonb_build_object('behavior', versioning_behavior,
                          'deploymentVersion', deployment_version) AS directive
FROM executions;
ALTER TABLE directive ADD PRIMARY KEY (run_id);

-- relocation: every legacy auto queue that holds rows, its default destination, and the
-- first free destination id (above both last_task_id and the highest stored id).
CREATE TEMP TABLE relocation ON COMMIT DROP AS
SELECT s.physical_queue AS source,
       left(s.physical_queue, length(s.physical_queue) - length('@auto')) AS destination,
       s.namespace, s.task_queue, s.task_type, s.partition,
       src.max_id AS source_max_id,
       src.moved,
       greatest(coalesce(d.last_task_id, 0), coalesce(dst.max_id, 0)) AS base_id
FROM task_queues s
JOIN (SELECT physical_queue, max(task_id) AS max_id, count(*) AS moved
      FROM tasks GROUP BY physical_queue) src ON src.physical_queue = s.physical_queue
LEFT JOIN task_queues d
       ON d.physical_queue = left(s.physical_queue, length(s.physical_queue) - length('@auto'))
LEFT JOIN LATERAL (SELECT max(t.task_id) AS max_id FROM tasks t
                   WHERE t.physical_queue = d.physical_queue) dst ON true
WHERE s.version = 'auto';
ALTER TABLE relocation ADD PRIMARY KEY (source);
