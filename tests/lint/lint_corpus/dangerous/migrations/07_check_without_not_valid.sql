-- expect: squawk.constraint-missing-not-valid
-- A CHECK validated at once scans tasks under ACCESS EXCLUSIVE.
SET lock_timeout = '5s';
SET statement_timeout = '60s';
ALTER TABLE tasks ADD CONSTRAINT tasks_id_positive CHECK (task_id > 0);
