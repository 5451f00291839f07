-- expect: squawk.adding-required-field
-- NOT NULL added without a backfill (add nullable, backfill, then constrain).
SET lock_timeout = '5s';
SET statement_timeout = '60s';
ALTER TABLE tasks ADD COLUMN queue_name text NOT NULL;
