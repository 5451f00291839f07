-- Triggers on the hot path: every update of tasks would run them inside the writer's
-- transaction, with their own locks and failures. Migrations must not add any.
SET lock_timeout = '5s';
SET statement_timeout = '60s';
CREATE TRIGGER keep_task_queue_name
AFTER UPDATE ON public.tasks
REFERENCING OLD TABLE AS old_tasks NEW TABLE AS new_tasks
FOR EACH STATEMENT EXECUTE FUNCTION keep_task_queue_name();
CREATE OR REPLACE CONSTRAINT TRIGGER guard_range AFTER UPDATE OF range_id ON "task_queues"
DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION guard_range();
CREATE RULE no_delete AS ON DELETE TO tasks DO INSTEAD NOTHING;
