-- expect: squawk.transaction-nesting
-- The runner owns the transaction: a COMMIT here splits the revision and breaks rollback.
BEGIN;
UPDATE runtime_protocol SET min_protocol = 5, max_protocol = 5;
COMMIT;
