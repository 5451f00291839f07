-- queueguard plan: what a statement did, read in the scratch database around it, and what
-- the target holds (read only). Relations of the system schemas are never ours to report.

-- name: own_locks
-- The relation locks this backend holds right now (the open transaction's), by oid: names
-- come from the relations read before the statement (a dropped table has none after it).
SELECT l.relation, l.mode
FROM pg_locks l
WHERE l.pid = pg_backend_pid() AND l.locktype = 'relation' AND l.granted
  AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database());

-- name: pid_locks
-- Another backend's relation locks, granted or awaited (a statement outside a transaction,
-- watched from a second session).
SELECT l.relation, l.mode, l.granted
FROM pg_locks l
WHERE l.pid = %(pid)s AND l.locktype = 'relation'
  AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database());

-- name: pid_waiting
-- Whether the backend waits for any lock (relation, virtualxid, transactionid, …).
SELECT EXISTS (SELECT 1 FROM pg_locks WHERE pid = %(pid)s AND NOT granted);

-- name: relations
-- Every user relation with its file node (a rewrite gives it a new one) and kind. Read
-- around every statement a plan watches, so kept cheap: the file node as pg_class holds it
-- (a user relation is never mapped; 0, no storage, said as NULL as pg_relation_filenode
-- says it) and an index's table by a join (a function call and a subquery per row cost 4x).
SELECT c.oid, c.oid::regclass::text, c.relkind::text, NULLIF(c.relfilenode, 0), i.indrelid
FROM pg_class c
JOIN pg_namespace n ON n.oid = c.relnamespace
LEFT JOIN pg_index i ON i.indexrelid = c.oid
WHERE c.relkind IN ('r', 'p', 'm', 'i', 't', 'S')
  AND n.nspname NOT IN ('pg_catalog', 'information_schema', 'pg_toast')
  AND n.nspname NOT LIKE 'pg_temp%' AND n.nspname NOT LIKE 'pg_toast_temp%';

-- name: xact_scans
-- Whole-table reads this transaction made so far, per table (not yet in
-- pg_stat_user_tables): its sequential scans, plus one for every half of the table's rows its
-- indexes returned — a foreign key validated by a merge join over an index-only scan reads
-- no heap but walks the whole index; a lookup of a few rows does not count. The tables are
-- pg_stat_xact_user_tables' own, read without the view's other columns.
SELECT relid, scans FROM (
  SELECT c.oid AS relid,
         pg_stat_get_xact_numscans(c.oid)
         + floor(2 * COALESCE((SELECT sum(pg_stat_get_xact_tuples_returned(i.indexrelid))
                               FROM pg_index i WHERE i.indrelid = c.oid), 0)
                 / greatest(c.reltuples, 1))::bigint AS scans
  FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
  WHERE c.relkind IN ('r', 't', 'm', 'p')
    AND n.nspname NOT IN ('pg_catalog', 'information_schema') AND n.nspname !~ '^pg_toast'
) s
WHERE scans > 0;

-- name: flush_stats
-- Make this backend report its statistics when it next goes idle (PostgreSQL 15+): a
-- statement outside a transaction is seen in pg_stat_user_tables only once they are flushed.
SELECT pg_stat_force_next_flush();

-- name: table_scans
-- Sequential scans and heap blocks read of each table so far (flushed statistics).
SELECT t.relid, t.seq_scan + COALESCE(io.heap_blks_read + io.heap_blks_hit, 0)
FROM pg_stat_user_tables t JOIN pg_statio_user_tables io USING (relid);

-- name: table_sizes
-- Rows and bytes of tables (heap, indexes, TOAST with its index), by name: the sample's and
-- the target's. `leave_out`: schemas not read (a schema target's neighbours, other tenants).
SELECT c.oid::regclass::text,
       CASE WHEN c.reltuples >= 0 THEN c.reltuples::bigint END,
       pg_relation_size(c.oid),
       COALESCE(pg_indexes_size(c.oid), 0),
       (SELECT count(*) FROM pg_index i WHERE i.indrelid = c.oid),
       CASE WHEN c.reltoastrelid <> 0 THEN pg_total_relation_size(c.reltoastrelid) ELSE 0 END
FROM pg_class c
JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE c.relkind IN ('r', 'p', 'm')
  AND n.nspname NOT IN ('pg_catalog', 'information_schema', 'pg_toast')
  AND n.nspname !~ '^pg_temp'
  AND n.nspname <> ALL(%(leave_out)s::text[]);

-- name: blockers
-- Sessions on the target that hold a lock on a table by name, with the age of their
-- transaction: what a statement would queue behind (read only).
SELECT l.relation::regclass::text, l.mode, l.pid, a.state,
       EXTRACT(EPOCH FROM (clock_timestamp() - a.xact_start)) * 1000,
       left(a.query, 200)
FROM pg_locks l
JOIN pg_stat_activity a ON a.pid = l.pid
WHERE l.locktype = 'relation' AND l.granted AND l.pid <> pg_backend_pid()
  AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
  AND l.relation::regclass::text = ANY(%(relations)s);

-- name: foreign_keys
-- The foreign keys of the user's tables: a sample must keep only rows whose parent it has.
SELECT conrelid::regclass::text, confrelid::regclass::text,
       ARRAY(SELECT quote_ident(attname) FROM unnest(conkey) WITH ORDINALITY k(n, o)
             JOIN pg_attribute ON attrelid = conrelid AND attnum = k.n ORDER BY k.o),
       ARRAY(SELECT quote_ident(attname) FROM unnest(confkey) WITH ORDINALITY k(n, o)
             JOIN pg_attribute ON attrelid = confrelid AND attnum = k.n ORDER BY k.o)
FROM pg_constraint c
JOIN pg_namespace n ON n.oid = c.connamespace
WHERE c.contype = 'f' AND n.nspname NOT IN ('pg_catalog', 'information_schema')
  AND n.nspname <> ALL(%(leave_out)s::text[]);

-- name: sequence_values
-- Each sequence's position on the target, which a schema-only dump leaves at its start: the
-- sample's sequences go on from there, or a migration's first insert (Django's recorder
-- writing django_migrations, a data migration) collides with a copied row's id. NULL: never
-- called, or no privilege to read it (left at its start).
SELECT quote_ident(schemaname) || '.' || quote_ident(sequencename), last_value
FROM pg_sequences
WHERE last_value IS NOT NULL
  AND schemaname NOT IN ('pg_catalog', 'information_schema')
  AND schemaname <> ALL(%(leave_out)s::text[]);

-- name: set_sequence_value
SELECT setval(%(sequence)s::regclass, %(value)s, true);

-- name: wal_flush
-- Ask this backend's pending statistics to be flushed at the end of this transaction (its
-- WAL counters then read true in the next one: pg_stat_get_backend_wal, PostgreSQL 18).
SELECT pg_stat_force_next_flush();

-- name: backend_wal
-- The WAL this backend has written, in bytes (PostgreSQL 18: its own, no other session's).
SELECT wal_bytes FROM pg_stat_get_backend_wal(pg_backend_pid());

-- name: server_wal
-- Where the server's WAL insertion is, in bytes (before 18: every session's WAL counts).
SELECT pg_wal_lsn_diff(pg_current_wal_insert_lsn(), '0/0');

-- name: relation_bytes
-- The size of relations by name (main fork, and a table's TOAST and indexes with it): the
-- new files a statement wrote (what it rewrote, what it created).
SELECT coalesce(sum(CASE WHEN c.relkind IN ('r', 'm', 'p') THEN pg_total_relation_size(c.oid)
                         ELSE pg_relation_size(c.oid) END), 0)
FROM pg_class c
WHERE c.oid::regclass::text = ANY(%(names)s)
  -- an index whose table is named already is in that table's total
  AND NOT (c.relkind = 'i' AND (SELECT i.indrelid::regclass::text FROM pg_index i
                                WHERE i.indexrelid = c.oid) = ANY(%(names)s));

-- name: database_bytes
-- A database's relation files (what a rewrite or a build adds until its commit).
SELECT pg_database_size(current_database());

-- name: write_counts
-- Rows inserted, updated and deleted in each table since the statistics were reset: read
-- twice, a few seconds apart, the writers' rate (`plan --online`'s change log).
SELECT relid::regclass::text, n_tup_ins + n_tup_upd + n_tup_del FROM pg_stat_user_tables;

-- name: sample_tables
-- The scratch copy's own tables, for its VACUUM ANALYZE (a partition through its parent;
-- the system catalogs left alone: nothing the scaling reads is theirs).
SELECT quote_ident(n.nspname) || '.' || quote_ident(c.relname)
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE c.relkind IN ('r', 'm', 'p') AND NOT c.relispartition
  AND n.nspname NOT IN ('pg_catalog', 'information_schema', 'pg_toast')
  AND n.nspname !~ '^pg_temp'
ORDER BY 1;
