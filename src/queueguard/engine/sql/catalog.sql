-- The system catalogs a Catalog is read from, one query per section (engine/catalog.py),
-- each for the schema %(schema)s, read-only.

-- name: tables
SELECT c.relname, c.relkind, c.relpersistence
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = %(schema)s AND c.relkind IN ('r', 'p', 'f', 'm')

-- name: columns
SELECT c.relname, a.attname,
       format_type(a.atttypid, a.atttypmod)
       || CASE WHEN a.attcollation <> 0 AND a.attcollation <> t.typcollation
               THEN ' COLLATE ' || quote_ident(co.collname) ELSE '' END,
       NOT a.attnotnull, pg_get_expr(d.adbin, d.adrelid), a.attidentity, a.attgenerated
FROM pg_attribute a
JOIN pg_class c ON c.oid = a.attrelid
JOIN pg_namespace n ON n.oid = c.relnamespace
JOIN pg_type t ON t.oid = a.atttypid
LEFT JOIN pg_collation co ON co.oid = a.attcollation
LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
WHERE n.nspname = %(schema)s AND c.relkind IN ('r', 'p', 'f', 'm', 'v')
  AND a.attnum > 0 AND NOT a.attisdropped
ORDER BY c.relname, a.attnum

-- name: constraints
-- PostgreSQL 18 records NOT NULL as constraints (contype 'n'); older majors do not. Column
-- nullability already carries that fact, so they are skipped and catalogs compare across majors.
SELECT c.relname, pg_get_constraintdef(k.oid, true)
FROM pg_constraint k
JOIN pg_class c ON c.oid = k.conrelid
JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = %(schema)s AND k.contype <> 'n'

-- name: indexes
SELECT c.relname, pg_get_indexdef(i.indexrelid)
FROM pg_index i
JOIN pg_class c ON c.oid = i.indrelid
JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = %(schema)s

-- name: triggers
SELECT c.relname, pg_get_triggerdef(t.oid, true)
FROM pg_trigger t
JOIN pg_class c ON c.oid = t.tgrelid
JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = %(schema)s AND NOT t.tgisinternal

-- name: functions
SELECT p.proname || '(' || pg_get_function_identity_arguments(p.oid) || ')',
       pg_get_functiondef(p.oid)
FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
WHERE n.nspname = %(schema)s AND p.prokind IN ('f', 'p')
  AND NOT EXISTS (SELECT 1 FROM pg_depend d
                  WHERE d.classid = 'pg_proc'::regclass AND d.objid = p.oid
                    AND d.deptype = 'e')

-- name: sequences
SELECT s.relname,
       (SELECT t.relname || '.' || a.attname
        FROM pg_depend d
        JOIN pg_class t ON t.oid = d.refobjid
        JOIN pg_attribute a ON a.attrelid = d.refobjid AND a.attnum = d.refobjsubid
        WHERE d.classid = 'pg_class'::regclass AND d.objid = s.oid
          AND d.refclassid = 'pg_class'::regclass AND d.deptype IN ('a', 'i')
        LIMIT 1),
       format_type(q.seqtypid, NULL), q.seqstart, q.seqincrement, q.seqmin, q.seqmax,
       q.seqcache, q.seqcycle
FROM pg_class s
JOIN pg_namespace n ON n.oid = s.relnamespace
JOIN pg_sequence q ON q.seqrelid = s.oid
WHERE n.nspname = %(schema)s AND s.relkind = 'S'

-- name: views
SELECT c.relname, c.relkind::text || ': ' || pg_get_viewdef(c.oid, true)
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = %(schema)s AND c.relkind IN ('v', 'm')

-- name: types
SELECT t.typname,
       CASE t.typtype
         WHEN 'e' THEN 'enum (' || (SELECT string_agg(quote_literal(e.enumlabel), ', '
                                                      ORDER BY e.enumsortorder)
                                    FROM pg_enum e WHERE e.enumtypid = t.oid) || ')'
         ELSE 'domain ' || format_type(t.typbasetype, t.typtypmod)
              || CASE WHEN t.typnotnull THEN ' NOT NULL' ELSE '' END
              || coalesce(' DEFAULT ' || t.typdefault, '')
              || coalesce((SELECT ' ' || string_agg(pg_get_constraintdef(k.oid, true), ' '
                                                    ORDER BY pg_get_constraintdef(k.oid, true))
                           FROM pg_constraint k WHERE k.contypid = t.oid), '')
       END
FROM pg_type t JOIN pg_namespace n ON n.oid = t.typnamespace
WHERE n.nspname = %(schema)s AND t.typtype IN ('e', 'd')
