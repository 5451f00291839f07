-- check:    schema.table_missing (blocking), schema.column_missing (blocking),
--           schema.column_type (blocking), schema.key_missing (blocking),
--           schema.name_taken (blocking)
-- applies-to: 003
-- What:     the physical contract migration 004 relies on, and nothing beyond it: the
--           tables it reads and rewrites (tasks, task_queues, runtime_protocol, executions),
--           the columns it uses with their types, the unique keys it relies on (tasks
--           (physical_queue, task_id) for id collisions and lookups, task_queues
--           (physical_queue) for its ON CONFLICT, executions (run_id) for one directive per
--           run), and the name of the table it creates (queueguard_migrations) being free.
--           Constraint names, column order, defaults, CHECKs, sequences, statistics and
--           storage are not part of the contract and are not checked.
-- Cost:     catalog lookups only (pg_class, pg_attribute, pg_index); no table is read.
-- Locks:    ACCESS SHARE on catalog tables only. Read-only; no row when the contract holds.
WITH columns_used (tbl, col, typ) AS (
    VALUES ('tasks', 'physical_queue', 'text'),
           ('tasks', 'task_id', 'bigint'),
           ('tasks', 'data', 'jsonb'),
           ('tasks', 'created_at', 'timestamp with time zone'),
           ('task_queues', 'physical_queue', 'text'),
           ('task_queues', 'namespace', 'text'),
           ('task_queues', 'task_queue', 'text'),
           ('task_queues', 'task_type', 'text'),
           ('task_queues', 'partition', 'integer'),
           ('task_queues', 'version', 'text'),
           ('task_queues', 'range_id', 'bigint'),
           ('task_queues', 'ack_level', 'bigint'),
           ('task_queues', 'last_task_id', 'bigint'),
           ('runtime_protocol', 'min_protocol', 'integer'),
           ('runtime_protocol', 'max_protocol', 'integer'),
           ('executions', 'run_id', 'uuid'),
           ('executions', 'versioning_behavior', 'text'),
           ('executions', 'deployment_version', 'text')
), keys_used (tbl, cols) AS (
    VALUES ('tasks', ARRAY['physical_queue', 'task_id']),
           ('task_queues', ARRAY['physical_queue']),
           ('executions', ARRAY['run_id'])
), names_created (name) AS (
    VALUES ('queueguard_migrations')
), tables AS (
    SELECT u.tbl, c.oid AS rel
    FROM (SELECT DISTINCT tbl FROM columns_used) AS u
    LEFT JOIN pg_class AS c ON c.oid = to_regclass(u.tbl) AND c.relkind IN ('r', 'p')
), problems AS (
    SELECT 'schema.table_missing' AS code, t.tbl AS object,
           jsonb_build_object('table', t.tbl) AS sample
    FROM tables AS t
    WHERE t.rel IS NULL
    UNION ALL
    SELECT CASE WHEN a.attname IS NULL THEN 'schema.column_missing'
                ELSE 'schema.column_type' END,
           u.tbl,
           jsonb_build_object('column', u.col, 'expected', u.typ,
                              'found', format_type(a.atttypid, a.atttypmod))
    FROM columns_used AS u
    JOIN tables AS t ON t.tbl = u.tbl AND t.rel IS NOT NULL
    LEFT JOIN pg_attribute AS a
           ON a.attrelid = t.rel AND a.attname = u.col AND a.attnum > 0 AND NOT a.attisdropped
    WHERE a.attname IS NULL OR format_type(a.atttypid, a.atttypmod) <> u.typ
    UNION ALL
    SELECT 'schema.key_missing', k.tbl, jsonb_build_object('uniqueKey', k.cols)
    FROM keys_used AS k
    JOIN tables AS t ON t.tbl = k.tbl AND t.rel IS NOT NULL
    WHERE NOT EXISTS (
        SELECT 1
        FROM pg_index AS i
        WHERE i.indrelid = t.rel AND i.indisunique AND i.indisvalid AND i.indpred IS NULL
          AND ARRAY(SELECT a.attname::text
                    FROM unnest(i.indkey::int2[]) WITH ORDINALITY AS x (attnum, pos)
                    JOIN pg_attribute AS a ON a.attrelid = t.rel AND a.attnum = x.attnum
                    ORDER BY x.pos) = k.cols
          AND i.indnkeyatts = cardinality(k.cols)
    )
    UNION ALL
    SELECT 'schema.name_taken', n.name, jsonb_build_object('name', n.name)
    FROM names_created AS n
    WHERE to_regclass(n.name) IS NOT NULL
), numbered AS (
    SELECT p.*, row_number() OVER (PARTITION BY p.code, p.object ORDER BY p.sample::text) AS n
    FROM problems AS p
)
SELECT code,
       'blocking' AS severity,
       object,
       count(*) AS count,
       coalesce(jsonb_agg(sample ORDER BY n)
                FILTER (WHERE n <= coalesce(nullif(current_setting('queueguard.samples', true),
                                                   ''), '10')::int),
                '[]'::jsonb) AS samples
FROM numbered
GROUP BY code, object
ORDER BY code, object;
