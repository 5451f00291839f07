-- expect: squawk.require-concurrent-index-deletion
-- DROP INDEX takes ACCESS EXCLUSIVE on the table.
SET lock_timeout = '5s';
SET statement_timeout = '60s';
DROP INDEX tasks_created_at;
