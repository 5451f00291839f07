-- expect: migration.row_loop
-- Batching inside one transaction keeps every lock until commit: still a loop.
SET lock_timeout = '5s';
SET statement_timeout = '60s';
DO $$
BEGIN
    LOOP
        DELETE FROM tasks WHERE ctid IN (SELECT ctid FROM tasks WHERE task_id < 0 LIMIT 1000);
        EXIT WHEN NOT FOUND;
    END LOOP;
END $$;
