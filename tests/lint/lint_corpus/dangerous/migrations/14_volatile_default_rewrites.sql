-- expect: squawk.adding-field-with-default
-- A volatile default rewrites every row.
SET lock_timeout = '5s';
SET statement_timeout = '60s';
ALTER TABLE tasks ADD COLUMN picked_at timestamptz DEFAULT clock_timestamp();
