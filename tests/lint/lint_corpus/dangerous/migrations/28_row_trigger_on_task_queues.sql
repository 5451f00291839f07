-- expect: migration.hot_path_trigger
-- Every checkpoint updates task_queues: a row trigger runs in each one.
SET lock_timeout = '5s';
SET statement_timeout = '60s';
CREATE OR REPLACE TRIGGER audit_ack BEFORE UPDATE OF ack_level ON public.task_queues
FOR EACH ROW EXECUTE FUNCTION audit_ack();
