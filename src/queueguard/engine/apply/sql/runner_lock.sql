-- The runner lock: one upgrade of a target at a time (runner_lock.py says how it is taken).
-- The key is one per target: 'queueguard-upgrade' for a database, one of its own for each
-- schema target of `fleet` (runner_lock.RUNNER_KEY).

-- name: in_transaction
-- Held until the transaction ends: through a transaction pooler it stays with the
-- transaction (a session lock would stay on whichever pooled server connection took it),
-- and COMMIT or ROLLBACK releases it, even a killed runner's.
SELECT pg_try_advisory_xact_lock(hashtext(%(key)s));

-- name: for_statement
-- The same lock for a statement that runs outside a transaction (session-level, released
-- right after it: a pooler in transaction mode is no place for such statements anyway).
SELECT pg_try_advisory_lock(hashtext(%(key)s));

-- name: release_statement
SELECT pg_advisory_unlock(hashtext(%(key)s));
