-- expect: audit.not_read_only
-- A second statement after COMMIT would run outside the read-only transaction.
SELECT 1;
COMMIT;
DELETE FROM tasks;
