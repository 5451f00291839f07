-- expect: squawk.ban-truncate-cascade
-- CASCADE silently empties every referencing table.
SET lock_timeout = '5s';
SET statement_timeout = '60s';
TRUNCATE executions CASCADE;
