-- expect: squawk.require-concurrent-index-creation
-- A plain CREATE INDEX blocks every spool while it builds.
SET lock_timeout = '5s';
SET statement_timeout = '60s';
CREATE INDEX tasks_created_at ON tasks (created_at);
