-- Whole rows: every column of every row of every table of the current schema, as verify
-- compares them with the golden state (queueguard.queue_schema.rows). Catalog only here; the row
-- query itself is composed from these columns (psycopg.sql), one per table.

-- name: tables
-- Each table of the current schema with its columns in order, which of them are timestamps,
-- and its primary key's columns (the rows' order; without one, every column).
SELECT c.relname::text,
       array_agg(a.attname::text ORDER BY a.attnum),
       array_agg(a.attname::text ORDER BY a.attnum)
           FILTER (WHERE a.atttypid IN ('timestamptz'::regtype, 'timestamp'::regtype)),
       coalesce((SELECT array_agg(k.attname::text ORDER BY array_position(i.indkey, k.attnum))
                 FROM pg_index i
                 JOIN pg_attribute k ON k.attrelid = i.indrelid AND k.attnum = ANY (i.indkey)
                 WHERE i.indrelid = c.oid AND i.indisprimary), '{}')
FROM pg_class c
JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
WHERE c.relnamespace = current_schema()::regnamespace AND c.relkind IN ('r', 'p')
GROUP BY c.oid, c.relname
ORDER BY c.relname;

-- name: clock
-- The server's clock now (not the transaction's start): what "written by the upgrade" is
-- measured against.
SELECT clock_timestamp();
