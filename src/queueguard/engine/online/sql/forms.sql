-- The online forms of single statements (upgrade --migrations DIR --online): what each form
-- asks the catalog to stay resumable. `table` is the table as the statement writes it.

-- name: constraint_names
SELECT conname FROM pg_constraint WHERE conrelid = %(table)s::regclass;

-- name: constraint_validated
-- NULL row: no such constraint yet; false: added NOT VALID, not yet validated.
SELECT convalidated FROM pg_constraint
WHERE conrelid = %(table)s::regclass AND conname = %(name)s;

-- name: nullable_columns
-- Of `columns`, those that still accept NULL (a primary key's columns go through the
-- SET NOT NULL form first).
SELECT attname FROM pg_attribute
WHERE attrelid = %(table)s::regclass AND attname = ANY(%(columns)s) AND attnum > 0
  AND NOT attisdropped AND NOT attnotnull
ORDER BY attnum;

-- name: index_valid
-- NULL row: no index of that name in the table's schema; else whether it is valid.
SELECT i.indisvalid
FROM pg_class c JOIN pg_index i ON i.indexrelid = c.oid
WHERE c.relname = %(name)s
  AND c.relnamespace = (SELECT relnamespace FROM pg_class WHERE oid = %(table)s::regclass);

-- name: schema_of
SELECT quote_ident(n.nspname)
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE c.oid = %(table)s::regclass;
