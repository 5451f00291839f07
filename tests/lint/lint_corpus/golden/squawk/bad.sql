-- NOT NULL without a backfill: add the column nullable, backfill, and only then constrain
-- it. Both statements scan and rewrite or check tasks under ACCESS EXCLUSIVE.
SET lock_timeout = '5s';
SET statement_timeout = '60s';
ALTER TABLE tasks ADD COLUMN queue_name text NOT NULL;
ALTER TABLE tasks ALTER COLUMN queue_name SET NOT NULL;
CREATE INDEX tasks_created_at ON tasks (created_at);
