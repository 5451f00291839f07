-- expect: squawk.adding-not-nullable-field
-- Expand and backfill are right, but contracting with SET NOT NULL still scans: use a
-- NOT VALID check, validate it, then SET NOT NULL.
SET lock_timeout = '5s';
SET statement_timeout = '60s';
ALTER TABLE tasks ADD COLUMN queue_name text;
UPDATE tasks SET queue_name = split_part(physical_queue, '/', 2);
ALTER TABLE tasks ALTER COLUMN queue_name SET NOT NULL;
