-- Set-based: one statement moves every row. FOR UPDATE in a query and the word LOOP inside
-- dynamic SQL or a comment are not loops.
SET lock_timeout = '5s';
SET statement_timeout = '60s';
DO $$
BEGIN
    PERFORM 1 FROM task_queues FOR UPDATE;
    EXECUTE 'UPDATE tasks SET data = data WHERE data ? ''LOOP''';  -- no LOOP here either
    UPDATE tasks t SET data = jsonb_set(t.data, '{task,attempt}', '1')
    FROM task_queues q WHERE q.physical_queue = t.physical_queue;
END
$$;
CREATE FUNCTION pg_temp.bump(q text) RETURNS bigint
LANGUAGE sql AS $fn$
    UPDATE task_queues SET range_id = range_id + 1 WHERE physical_queue = q RETURNING range_id
$fn$;
