-- expect: squawk.changing-column-type
-- A type change rewrites every row under ACCESS EXCLUSIVE.
SET lock_timeout = '5s';
SET statement_timeout = '60s';
ALTER TABLE tasks ALTER COLUMN task_id TYPE numeric;
