-- check:    schema.table_missing (blocking), schema.column_missing (blocking),
--           schema.column_type (blocking), schema.name_taken (blocking)
-- applies-to: 001 002
-- What:     the physical contract the pending migrations rely on in a v0.1/v0.2 database, and
--           nothing beyond it: 003 reads every column of the delivery-id spool (tasks) to
--           build queue keys and copy rows, and creates task_queues, runtime_protocol and
--           tasks_v3 (those names must be free); 004 later reads executions (run_id,
--           versioning_behavior, deployment_version) and creates queueguard_migrations.
--           queueguard.target (required: the revision to upgrade to) limits the contract to
--           the revisions pending up to the target. Constraint names, defaults, CHECKs and sequences are not checked.
-- Cost:     catalog lookups only (pg_class, pg_attribute); no table is read.
-- Locks:    ACCESS SHARE on catalog tables only. Read-only; no row when the contract holds.
WITH target AS (
    SELECT current_setting('queueguard.target') AS revision
), columns_used (needed_by, tbl, col, typ) AS (
    VALUES ('003', 'tasks', 'delivery_id', 'bigint'),
           ('003', 'tasks', 'namespace', 'text'),
           ('003', 'tasks', 'task_queue', 'text'),
           ('003', 'tasks', 'task_type', 'text'),
           ('003', 'tasks', 'partition', 'integer'),
           ('003', 'tasks', 'version', 'text'),
           ('003', 'tasks', 'data', 'jsonb'),
           ('003', 'tasks', 'created_at', 'timestamp with time zone'),
           ('004', 'executions', 'run_id', 'uuid'),
           ('004', 'executions', 'versioning_behavior', 'text'),
           ('004', 'executions', 'deployment_version', 'text')
), names_created (needed_by, name) AS (
    VALUES ('003', 'task_queues'), ('003', 'runtime_protocol'), ('003', 'tasks_v3'),
           ('004', 'queueguard_migrations')
), pending_columns AS (
    SELECT u.* FROM columns_used AS u, target WHERE u.needed_by <= target.revision
), tables AS (
    SELECT u.tbl, c.oid AS rel
    FROM (SELECT DISTINCT tbl FROM pending_columns) AS u
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
    FROM pending_columns AS u
    JOIN tables AS t ON t.tbl = u.tbl AND t.rel IS NOT NULL
    LEFT JOIN pg_attribute AS a
           ON a.attrelid = t.rel AND a.attname = u.col AND a.attnum > 0 AND NOT a.attisdropped
    WHERE a.attname IS NULL OR format_type(a.atttypid, a.atttypmod) <> u.typ
    UNION ALL
    SELECT 'schema.name_taken', n.name, jsonb_build_object('name', n.name)
    FROM names_created AS n, target
    WHERE n.needed_by <= target.revision AND to_regclass(n.name) IS NOT NULL
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
