-- Lock budgets: what a revision's transaction holds, read just before it commits.

-- name: relations
-- Tables of the current schema and their indexes, each as (oid, table): an index counts as
-- its table. Read when the revision starts, so relations it creates itself (temp tables, new
-- tables) are not in the map and fall outside the budget. Catalog only.
SELECT c.oid::bigint, coalesce(t.relname, c.relname)::text
FROM pg_class AS c
JOIN pg_namespace AS n ON n.oid = c.relnamespace
LEFT JOIN pg_index AS i ON i.indexrelid = c.oid
LEFT JOIN pg_class AS t ON t.oid = i.indrelid
WHERE n.nspname = current_schema() AND c.relkind IN ('r', 'p', 'i', 'I');

-- name: held
-- The relation locks this backend holds (granted), by relation oid and mode.
SELECT relation::bigint, mode
FROM pg_locks
WHERE pid = pg_backend_pid() AND locktype = 'relation' AND granted
  AND database = (SELECT oid FROM pg_database WHERE datname = current_database());

-- name: held_tables
-- The same in one statement, each lock by its table's name (an index counts as its table),
-- for tables of the current schema: the online path reads it before every commit.
SELECT coalesce(t.relname, c.relname)::text, l.mode
FROM pg_locks AS l
JOIN pg_class AS c ON c.oid = l.relation
JOIN pg_namespace AS n ON n.oid = c.relnamespace
LEFT JOIN pg_index AS i ON i.indexrelid = c.oid
LEFT JOIN pg_class AS t ON t.oid = i.indrelid
WHERE l.pid = pg_backend_pid() AND l.locktype = 'relation' AND l.granted
  AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
  AND n.nspname = current_schema() AND c.relkind IN ('r', 'p', 'i', 'I');

-- name: backend_locks
-- Every lock another backend (`pid`) holds or waits for, relation locks by their table's
-- name (a valid index counts as its table; NULL: not a table of the current schema, not a
-- relation lock — e.g. the virtualxid a CONCURRENTLY build waits on —, or an index no query
-- can use: one a concurrent build is creating or a concurrent drop is removing takes ACCESS
-- EXCLUSIVE on that index alone, which blocks no reader or writer of the table): what an
-- observer of the online path's autocommit statements sees.
SELECT CASE WHEN i.indexrelid IS NULL THEN c.relname
            WHEN i.indisvalid AND i.indislive THEN t.relname END::text,
       l.mode, l.granted
FROM pg_locks AS l
LEFT JOIN pg_class AS c
       ON c.oid = l.relation AND l.locktype = 'relation'
      AND c.relnamespace = current_schema()::regnamespace AND c.relkind IN ('r', 'p', 'i', 'I')
LEFT JOIN pg_index AS i ON i.indexrelid = c.oid
LEFT JOIN pg_class AS t ON t.oid = i.indrelid
WHERE l.pid = %(pid)s
  AND (l.database IS NULL OR l.database = (SELECT oid FROM pg_database
                                           WHERE datname = current_database()));

-- name: tables
-- The current schema's tables (an observer holds a lock on each one a ceiling limits).
SELECT relname::text FROM pg_class
WHERE relnamespace = current_schema()::regnamespace AND relkind IN ('r', 'p')
ORDER BY 1;
