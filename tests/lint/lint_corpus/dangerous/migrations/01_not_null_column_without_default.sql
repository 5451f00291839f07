-- expect: squawk.adding-required-field
-- NOT NULL added without a backfill: the pgflow review's first SQL comment.
SET lock_timeout = '5s';
SET statement_timeout = '60s';
ALTER TABLE tasks ADD COLUMN queue_name text NOT NULL;
