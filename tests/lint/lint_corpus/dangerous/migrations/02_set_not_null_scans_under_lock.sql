-- expect: squawk.adding-not-nullable-field
-- SET NOT NULL scans the table under ACCESS EXCLUSIVE.
SET lock_timeout = '5s';
SET statement_timeout = '60s';
ALTER TABLE tasks ALTER COLUMN queue_name SET NOT NULL;
