-- queueguard and Django projects: what a migration changed in the catalog, read from outside
-- its session before it starts and after it ends, to find a change no captured statement
-- explains (a raw connection, another thread, work sent to a job queue).

-- name: catalog_objects
-- Every user object with what a change to it alters: (its name, its table's name, a detail).
-- (an index's table is the table it indexes: a rewrite of the table gives it a new file too)
-- Read at every migration's end, so kept cheap: `oid >= 16384` (FirstNormalObjectId: no
-- object initdb made has one, every later one has) lets the attributes, constraints and
-- functions be read by index rather than by a scan of every system catalog's rows.
SELECT c.relname, coalesce(t.relname, c.relname),
       c.relkind::text || ':' || pg_relation_filenode(c.oid)::text
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
LEFT JOIN pg_index x ON x.indexrelid = c.oid LEFT JOIN pg_class t ON t.oid = x.indrelid
WHERE n.nspname NOT IN ('pg_catalog', 'information_schema') AND n.nspname NOT LIKE 'pg_toast%%'
  AND c.relkind IN ('r', 'p', 'm', 'v', 'i', 'S', 'f')
UNION ALL
SELECT a.attname, c.relname, format_type(a.atttypid, a.atttypmod) || ':' || a.attnotnull::text
       || ':' || coalesce(pg_get_expr(d.adbin, d.adrelid), '')
FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
JOIN pg_namespace n ON n.oid = c.relnamespace
LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
WHERE n.nspname NOT IN ('pg_catalog', 'information_schema') AND n.nspname NOT LIKE 'pg_toast%%'
  AND c.relkind IN ('r', 'p', 'm', 'v', 'f') AND a.attrelid >= 16384 AND a.attnum > 0 AND NOT a.attisdropped
UNION ALL
SELECT co.conname, coalesce(c.relname, ''), pg_get_constraintdef(co.oid) || ':' || co.convalidated::text
FROM pg_constraint co JOIN pg_namespace n ON n.oid = co.connamespace
LEFT JOIN pg_class c ON c.oid = co.conrelid
WHERE co.oid >= 16384 AND n.nspname NOT IN ('pg_catalog', 'information_schema')
UNION ALL
SELECT ci.relname, c.relname, i.indisvalid::text
FROM pg_index i JOIN pg_class ci ON ci.oid = i.indexrelid JOIN pg_class c ON c.oid = i.indrelid
JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname NOT IN ('pg_catalog', 'information_schema') AND n.nspname NOT LIKE 'pg_toast%%'
UNION ALL
SELECT t.tgname, c.relname, md5(pg_get_triggerdef(t.oid))
FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE NOT t.tgisinternal AND n.nspname NOT IN ('pg_catalog', 'information_schema')
UNION ALL
SELECT p.proname, '', md5(pg_get_functiondef(p.oid))
FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
WHERE p.oid >= 16384 AND n.nspname NOT IN ('pg_catalog', 'information_schema') AND p.prokind IN ('f', 'p')
UNION ALL
SELECT n.nspname, '', 'schema'
FROM pg_namespace n
WHERE n.nspname NOT IN ('pg_catalog', 'information_schema') AND n.nspname NOT LIKE 'pg_t%%';
