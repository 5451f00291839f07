-- expect: squawk.ban-drop-column
-- Old workers still read the column until they are stopped.
SET lock_timeout = '5s';
SET statement_timeout = '60s';
ALTER TABLE tasks DROP COLUMN created_at;
