-- expect: audit.not_read_only
-- EXPLAIN ANALYZE executes the statement.
EXPLAIN ANALYZE DELETE FROM tasks;
