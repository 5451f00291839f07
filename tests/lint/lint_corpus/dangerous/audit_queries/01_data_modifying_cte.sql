-- expect: audit.not_read_only
-- DELETE in a CTE: the query looks like a SELECT.
WITH gone AS (DELETE FROM tasks WHERE task_id < 0 RETURNING task_id)
SELECT count(*) FROM gone;
