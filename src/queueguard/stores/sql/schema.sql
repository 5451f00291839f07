-- Which queueguard schema a database holds (queueguard.stores.schema.read_state; preflight
-- runs the same statements under its bounded locks). Catalog lookups and one tiny read.

-- name: tables
-- Tables of the current schema; catalog only.
SELECT c.relname::text
FROM pg_class AS c
JOIN pg_namespace AS n ON n.oid = c.relnamespace
WHERE n.nspname = current_schema() AND c.relkind IN ('r', 'p')
ORDER BY 1;

-- name: versions
-- The revision Alembic recorded (one row in a healthy database); ACCESS SHARE only.
SELECT version_num::text FROM queueguard_version ORDER BY 1 LIMIT 11;

-- name: rollout
-- An online rollout's phase (the table exists only while one is in progress).
SELECT phase FROM queueguard_rollout WHERE target = %(target)s;

-- name: protocol
-- The handshake: the runtime_protocol window (exactly one row in a v0.3+ schema).
SELECT min_protocol, max_protocol FROM runtime_protocol;
