-- expect: migration.row_loop
-- One UPDATE per row while holding ACCESS EXCLUSIVE on tasks.
SET lock_timeout = '5s';
SET statement_timeout = '60s';
DO $$
DECLARE r record;
BEGIN
    FOR r IN SELECT physical_queue, task_id FROM tasks LOOP
        UPDATE tasks SET data = data || '{"v": 4}'
        WHERE physical_queue = r.physical_queue AND task_id = r.task_id;
    END LOOP;
END $$;
