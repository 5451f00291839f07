-- What `queueguard fleet` reads on the fleet's servers (never writes).

-- name: databases
-- The databases a [[discover]] pattern names (LIKE, escape \), templates and databases
-- that take no connections left out.
SELECT datname FROM pg_database
WHERE datname LIKE %(pattern)s AND NOT datistemplate AND datallowconn
ORDER BY datname;

-- name: schemas
SELECT nspname FROM pg_namespace WHERE nspname LIKE %(pattern)s ORDER BY nspname;

-- name: headroom
-- Connections the server has left for ordinary roles.
SELECT current_setting('max_connections')::int
       - current_setting('superuser_reserved_connections')::int
       - (SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend');

-- name: user_tables
-- The tables of a scratch copy of a sample, quoted, but the ledgers (`keep`): `fleet plan`
-- empties them to time each statement's fixed part.
SELECT quote_ident(n.nspname) || '.' || quote_ident(c.relname)
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE c.relkind IN ('r', 'p') AND NOT c.relispartition
  AND n.nspname NOT IN ('pg_catalog', 'information_schema') AND n.nspname !~ '^pg_'
  AND n.nspname !~ '^queueguard_'
  AND c.relname <> ALL(%(keep)s::text[])
  AND n.nspname || '.' || c.relname <> ALL(%(keep)s::text[]);

-- name: current_schema
SELECT current_schema();

-- name: user_schemas
-- A database target's schemas: every schema but the system's and queueguard's own.
SELECT nspname FROM pg_namespace
WHERE nspname NOT LIKE 'pg\_%%' AND nspname <> 'information_schema'
  AND nspname NOT LIKE 'queueguard\_%%'
ORDER BY nspname;

-- name: catalog
-- The objects of the given schemas, each with its definition, every name qualified (run
-- with search_path = pg_catalog): tables, columns, indexes, constraints, triggers, views,
-- sequences, functions. The tables in %(skip)s (the ledgers) and their parts left out;
-- objects of extensions left out (their extension's version says what they are).
SELECT 'table', format('%%I.%%I', n.nspname, c.relname),
       concat_ws(' ', c.relkind::text, c.relpersistence::text)
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = ANY(%(schemas)s) AND c.relkind IN ('r', 'p', 'f')
  AND NOT c.relname = ANY(%(skip)s)
  AND NOT EXISTS (SELECT FROM pg_depend d WHERE d.objid = c.oid AND d.deptype = 'e')
UNION ALL
SELECT 'column', format('%%I.%%I.%%I', n.nspname, c.relname, a.attname),
       concat_ws(' ', format_type(a.atttypid, a.atttypmod),
                 CASE WHEN a.attnotnull THEN 'NOT NULL' END,
                 'DEFAULT ' || pg_get_expr(d.adbin, d.adrelid),
                 CASE WHEN a.attgenerated <> '' THEN 'GENERATED' END,
                 CASE WHEN a.attidentity <> '' THEN 'IDENTITY' END,
                 CASE WHEN co.collname IS NOT NULL THEN 'COLLATE ' || co.collname END)
FROM pg_attribute a
JOIN pg_class c ON c.oid = a.attrelid
JOIN pg_namespace n ON n.oid = c.relnamespace
LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
LEFT JOIN pg_type ty ON ty.oid = a.atttypid
LEFT JOIN pg_collation co ON co.oid = a.attcollation AND a.attcollation <> ty.typcollation
WHERE n.nspname = ANY(%(schemas)s) AND c.relkind IN ('r', 'p', 'f', 'v', 'm')
  AND a.attnum > 0 AND NOT a.attisdropped AND NOT c.relname = ANY(%(skip)s)
  AND NOT EXISTS (SELECT FROM pg_depend x WHERE x.objid = c.oid AND x.deptype = 'e')
UNION ALL
SELECT 'index', format('%%I.%%I', n.nspname, i.relname), pg_get_indexdef(i.oid)
FROM pg_index x
JOIN pg_class i ON i.oid = x.indexrelid
JOIN pg_class t ON t.oid = x.indrelid
JOIN pg_namespace n ON n.oid = i.relnamespace
WHERE n.nspname = ANY(%(schemas)s) AND NOT t.relname = ANY(%(skip)s)
  AND NOT EXISTS (SELECT FROM pg_depend d WHERE d.objid = t.oid AND d.deptype = 'e')
UNION ALL
SELECT 'constraint', format('%%I.%%I.%%I', n.nspname, t.relname, k.conname),
       pg_get_constraintdef(k.oid)
FROM pg_constraint k
JOIN pg_class t ON t.oid = k.conrelid
JOIN pg_namespace n ON n.oid = t.relnamespace
WHERE n.nspname = ANY(%(schemas)s) AND NOT t.relname = ANY(%(skip)s)
  AND NOT EXISTS (SELECT FROM pg_depend d WHERE d.objid = t.oid AND d.deptype = 'e')
UNION ALL
SELECT 'trigger', format('%%I.%%I.%%I', n.nspname, t.relname, g.tgname),
       concat_ws(' ', pg_get_triggerdef(g.oid), g.tgenabled::text)
FROM pg_trigger g
JOIN pg_class t ON t.oid = g.tgrelid
JOIN pg_namespace n ON n.oid = t.relnamespace
WHERE n.nspname = ANY(%(schemas)s) AND NOT g.tgisinternal AND NOT t.relname = ANY(%(skip)s)
UNION ALL
SELECT 'view', format('%%I.%%I', n.nspname, c.relname), pg_get_viewdef(c.oid)
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = ANY(%(schemas)s) AND c.relkind IN ('v', 'm')
  AND NOT EXISTS (SELECT FROM pg_depend d WHERE d.objid = c.oid AND d.deptype = 'e')
UNION ALL
SELECT 'sequence', format('%%I.%%I', n.nspname, c.relname),
       concat_ws(' ', format_type(s.seqtypid, NULL), s.seqincrement, s.seqmin, s.seqmax,
                 s.seqcycle)
FROM pg_sequence s
JOIN pg_class c ON c.oid = s.seqrelid
JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = ANY(%(schemas)s) AND NOT c.relname = ANY(%(skip)s)
  AND NOT EXISTS (SELECT FROM pg_depend d WHERE d.objid = c.oid AND d.deptype = 'e')
UNION ALL
SELECT 'function', format('%%I.%%I(%%s)', n.nspname, p.proname,
                          pg_get_function_identity_arguments(p.oid)),
       pg_get_functiondef(p.oid)
FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
WHERE n.nspname = ANY(%(schemas)s) AND p.prokind IN ('f', 'p')
  AND NOT EXISTS (SELECT FROM pg_depend d WHERE d.objid = p.oid AND d.deptype = 'e')
ORDER BY 1, 2;
