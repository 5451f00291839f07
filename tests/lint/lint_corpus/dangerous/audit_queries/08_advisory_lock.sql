-- expect: audit.not_read_only
-- An advisory lock outlives the statement.
SELECT pg_advisory_lock(42);
