-- expect: squawk.require-concurrent-reindex
-- REINDEX blocks writes for the whole rebuild.
SET lock_timeout = '5s';
SET statement_timeout = '60s';
REINDEX TABLE tasks;
