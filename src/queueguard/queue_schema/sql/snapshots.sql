-- `queueguard snapshot import`: what the current schema holds, so that an import that fails
-- after installing the head schema into an empty database can leave it as it found it.

-- name: schema_objects
-- Every object of the current schema that a migration can create, as the DROP statement's
-- keyword and PostgreSQL's own quoted name (regclass / regprocedure / regtype text). Objects
-- an extension owns are left out: they were not ours to create.
SELECT kind, name FROM (
    SELECT CASE c.relkind WHEN 'v' THEN 'VIEW' WHEN 'm' THEN 'MATERIALIZED VIEW'
                          WHEN 'S' THEN 'SEQUENCE' ELSE 'TABLE' END AS kind,
           c.oid::regclass::text AS name, c.oid, 'pg_class'::regclass AS classid
    FROM pg_class AS c
    WHERE c.relnamespace = current_schema()::regnamespace
      AND c.relkind IN ('r', 'p', 'v', 'm', 'S')
    UNION ALL
    SELECT CASE p.prokind WHEN 'p' THEN 'PROCEDURE' WHEN 'a' THEN 'AGGREGATE'
                          ELSE 'FUNCTION' END,
           p.oid::regprocedure::text, p.oid, 'pg_proc'::regclass
    FROM pg_proc AS p
    WHERE p.pronamespace = current_schema()::regnamespace
    UNION ALL
    SELECT CASE t.typtype WHEN 'd' THEN 'DOMAIN' ELSE 'TYPE' END,
           t.oid::regtype::text, t.oid, 'pg_type'::regclass
    FROM pg_type AS t
    WHERE t.typnamespace = current_schema()::regnamespace
      AND (t.typtype IN ('e', 'd', 'r', 'm')
           OR (t.typtype = 'c' AND (SELECT c.relkind FROM pg_class AS c
                                    WHERE c.oid = t.typrelid) = 'c'))
) AS objects
WHERE NOT EXISTS (SELECT 1 FROM pg_depend AS d
                  WHERE d.classid = objects.classid AND d.objid = objects.oid
                    AND d.deptype = 'e')
ORDER BY CASE kind WHEN 'VIEW' THEN 0 WHEN 'MATERIALIZED VIEW' THEN 0 WHEN 'TABLE' THEN 1
                   WHEN 'SEQUENCE' THEN 2 WHEN 'PROCEDURE' THEN 3 WHEN 'AGGREGATE' THEN 3
                   WHEN 'FUNCTION' THEN 4 ELSE 5 END, name;
