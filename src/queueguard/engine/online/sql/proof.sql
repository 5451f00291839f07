-- The proof of `upgrade --online`: the rows of every table of the plain and the online end
-- states, compared in Python.

-- name: tables
-- Every ordinary table outside the system schemas, with its columns (generated ones too:
-- their values are part of the end state).
SELECT quote_ident(n.nspname) || '.' || quote_ident(c.relname),
       c.relname,
       array_agg(a.attname::text ORDER BY a.attnum),
       array_agg(format_type(a.atttypid, a.atttypmod) ORDER BY a.attnum)
FROM pg_class c
JOIN pg_namespace n ON n.oid = c.relnamespace
JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
WHERE c.relkind IN ('r', 'p')
  AND n.nspname NOT IN ('pg_catalog', 'information_schema', 'pg_toast')
  AND n.nspname NOT LIKE 'pg_temp%'
GROUP BY n.nspname, c.relname
ORDER BY 1;
