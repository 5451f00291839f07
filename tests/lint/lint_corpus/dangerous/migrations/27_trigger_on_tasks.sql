-- expect: migration.hot_path_trigger
-- A statement-level trigger on tasks: it would run inside every runtime transaction.
SET lock_timeout = '5s';
SET statement_timeout = '60s';
CREATE TRIGGER keep_task_queue_name
AFTER UPDATE ON tasks
REFERENCING OLD TABLE AS old_tasks NEW TABLE AS new_tasks
FOR EACH STATEMENT EXECUTE FUNCTION keep_task_queue_name();
