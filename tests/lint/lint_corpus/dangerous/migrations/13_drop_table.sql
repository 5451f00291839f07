-- expect: squawk.ban-drop-table
-- Dropping a table loses data and breaks old workers.
SET lock_timeout = '5s';
SET statement_timeout = '60s';
DROP TABLE task_queue_user_data;
