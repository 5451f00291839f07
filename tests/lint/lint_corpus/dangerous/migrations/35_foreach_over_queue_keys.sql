-- expect: migration.row_loop
-- FOREACH over an array of keys: one statement per queue.
SET lock_timeout = '5s';
SET statement_timeout = '60s';
DO LANGUAGE plpgsql $$
DECLARE q text;
BEGIN
    FOREACH q IN ARRAY ARRAY(SELECT physical_queue FROM task_queues) LOOP
        UPDATE task_queues SET range_id = range_id + 1 WHERE physical_queue = q;
    END LOOP;
END $$;
