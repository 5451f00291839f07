-- Step 1: carry History's version directive into every kept task row (relocated rows get
-- theirs as they move, in step 2, so no row is written twice). A run unknown to History
-- (or a runId that is not a uuid) gets "unversioned"; History will answer obsolete.
UPDATE tasks t
SET data = jsonb_set(t.data, '{task,versionDirective}',
                     coalesce(d.directive,
                              '{"behavior": "unversioned", "deploymentVersion": null}'))
FROM tasks k
LEFT JOIN directive d ON d.run_id = k.data -> 'task' ->> 'runId'
WHERE t.physical_queue = k.physical_queue AND t.task_id = k.task_id
  AND NOT EXISTS (SELECT 1 FROM relocation r WHERE r.source = k.physical_queue);
