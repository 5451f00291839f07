-- Per-row loops: one UPDATE per task while the revision holds ACCESS EXCLUSIVE on tasks.
SET lock_timeout = '5s';
SET statement_timeout = '60s';
DO $$
DECLARE
    r record;
BEGIN
    FOR r IN SELECT physical_queue, task_id FROM tasks ORDER BY task_id FOR UPDATE LOOP
        UPDATE tasks SET data = data WHERE physical_queue = r.physical_queue
          AND task_id = r.task_id;
    END LOOP;
END
$$;
CREATE OR REPLACE PROCEDURE pg_temp.backfill() LANGUAGE plpgsql AS $$
BEGIN
    WHILE EXISTS (SELECT 1 FROM tasks WHERE NOT data ? 'v') LOOP
        UPDATE tasks SET data = data || '{"v": 1}'
        WHERE task_id IN (SELECT task_id FROM tasks WHERE NOT data ? 'v' LIMIT 1000);
    END LOOP;
    LOOP
        EXIT WHEN NOT FOUND;
    END LOOP;
END
$$;
