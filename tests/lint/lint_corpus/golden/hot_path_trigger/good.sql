-- A trigger on a table the runtime does not write on every spool or checkpoint.
SET lock_timeout = '5s';
SET statement_timeout = '60s';
CREATE TRIGGER user_data_touch BEFORE UPDATE ON task_queue_user_data
FOR EACH ROW EXECUTE FUNCTION touch_updated_at();
