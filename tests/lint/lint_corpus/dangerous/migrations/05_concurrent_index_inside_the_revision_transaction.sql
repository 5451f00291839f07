-- expect: squawk.ban-concurrent-index-creation-in-transaction
-- The runner wraps each revision in one transaction: CONCURRENTLY fails there.
SET lock_timeout = '5s';
SET statement_timeout = '60s';
CREATE INDEX CONCURRENTLY IF NOT EXISTS tasks_created_at ON tasks (created_at);
