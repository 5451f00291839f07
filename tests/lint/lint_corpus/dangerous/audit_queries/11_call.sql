-- expect: audit.not_read_only
-- CALL runs a procedure, which can write.
CALL pg_temp.cleanup();
