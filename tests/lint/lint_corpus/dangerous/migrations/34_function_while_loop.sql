-- expect: migration.row_loop
-- A 'monstrous function' that backfills in a WHILE loop.
SET lock_timeout = '5s';
SET statement_timeout = '60s';
CREATE FUNCTION pg_temp.backfill() RETURNS void LANGUAGE plpgsql AS $fn$
BEGIN
    WHILE EXISTS (SELECT 1 FROM task_queues WHERE last_task_id < 0) LOOP
        UPDATE task_queues SET last_task_id = 0
        WHERE physical_queue = (SELECT physical_queue FROM task_queues
                                WHERE last_task_id < 0 LIMIT 1);
    END LOOP;
END
$fn$;
SELECT pg_temp.backfill();
