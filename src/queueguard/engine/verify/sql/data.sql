-- verify --migrations DIR on a set of another format: reading and adopting a restored copy's bookkeeping
-- (engine/verify/data.py).

-- name: temporal_version_exists
SELECT to_regclass('schema_version') IS NOT NULL;

-- name: temporal_db_names
-- Temporal's version row is keyed on the database's name (the tool's --db argument).
SELECT DISTINCT db_name FROM schema_version WHERE version_partition = 0;
