-- expect: squawk.ban-drop-not-null
-- Old workers rely on the column never being NULL.
SET lock_timeout = '5s';
SET statement_timeout = '60s';
ALTER TABLE executions ALTER COLUMN workflow_id DROP NOT NULL;
