-- The shadow-table rebuild (upgrade --migrations DIR --online): the online form of a
-- statement that rewrites a table. A copy of the table with the statement applied is built
-- in the schema queueguard_shadow under the table's own name, filled while the application
-- writes (changed keys captured into a log by triggers, replayed by re-reading the live row),
-- and swapped in by one short transaction (SET SCHEMA). `oid` is the live table's OID.
-- Names come out quoted (format('%I.%I', …)) so they can be pasted into SQL.

-- ---------------------------------------------------------------------------------------------
-- The live table

-- name: table_facts
-- NULL row: no such table. reltuples is the planner's estimate (-1: never analysed).
SELECT c.oid, n.nspname, c.relname, c.relkind::text, c.relpersistence::text,
       c.reloftype <> 0, c.relispartition, c.reltuples::bigint, c.reltype, t.typarray,
       coalesce(c.reloptions, '{}'), pg_get_userbyid(c.relowner)
FROM pg_class c
JOIN pg_namespace n ON n.oid = c.relnamespace
JOIN pg_type t ON t.oid = c.reltype
WHERE c.oid = to_regclass(%(table)s);

-- name: columns
-- Every attribute in attnum order, dropped ones too: the shadow is created with a
-- placeholder where the live table has a dropped column, so every attnum stays the same.
-- A placeholder gets a built-in type of the dropped column's length and alignment.
SELECT a.attnum, a.attname, a.attisdropped,
       CASE WHEN a.attisdropped THEN
           coalesce((SELECT format_type(t.oid, NULL) FROM pg_type t
                     WHERE t.typtype = 'b' AND t.typlen = a.attlen AND t.typalign = a.attalign
                       AND t.typelem = 0 AND t.typnamespace = 'pg_catalog'::regnamespace
                     ORDER BY t.oid LIMIT 1), 'integer')
       ELSE format_type(a.atttypid, a.atttypmod) END,
       CASE WHEN a.attcollation <> 0 AND a.attcollation <> ty.typcollation
            THEN format('%%I.%%I', cn.nspname, co.collname) END,
       a.attgenerated <> '', a.attidentity <> ''
FROM pg_attribute a
LEFT JOIN pg_type ty ON ty.oid = a.atttypid
LEFT JOIN pg_collation co ON co.oid = a.attcollation
LEFT JOIN pg_namespace cn ON cn.oid = co.collnamespace
WHERE a.attrelid = %(oid)s AND a.attnum > 0
ORDER BY a.attnum;

-- name: replay_key
-- The key rows are replayed by: the primary key, else the narrowest valid, immediate,
-- non-partial unique index on plain NOT NULL columns; and that index's name.
SELECT array_agg(a.attname::text ORDER BY k.ord), c.relname
FROM pg_index i
JOIN pg_class c ON c.oid = i.indexrelid
CROSS JOIN LATERAL unnest(i.indkey::int2[]) WITH ORDINALITY AS k(attnum, ord)
JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum
WHERE i.indrelid = %(oid)s AND i.indisunique AND i.indisvalid AND i.indimmediate
  AND i.indpred IS NULL AND i.indexprs IS NULL AND k.ord <= i.indnkeyatts
GROUP BY i.indexrelid, i.indisprimary, c.relname
HAVING bool_and(a.attnotnull)
ORDER BY i.indisprimary DESC, count(*), i.indexrelid
LIMIT 1;

-- name: owned_sequences
-- Sequences tied to a column: 'a' a serial's (OWNED BY; it lives on, the shadow's default
-- names it by OID), 'i' an identity's (it belongs to the column: the shadow gets its own).
SELECT format('%%I.%%I', n.nspname, s.relname), s.relname, a.attname, d.deptype::text
FROM pg_depend d
JOIN pg_class s ON s.oid = d.objid AND s.relkind = 'S'
JOIN pg_namespace n ON n.oid = s.relnamespace
JOIN pg_attribute a ON a.attrelid = d.refobjid AND a.attnum = d.refobjsubid
WHERE d.classid = 'pg_class'::regclass AND d.refclassid = 'pg_class'::regclass
  AND d.refobjid = %(oid)s AND d.deptype IN ('a', 'i')
ORDER BY a.attnum;

-- name: relation_names
-- The names that move with the table (its indexes and identity sequences): the shadow's
-- statements name them in the shadow schema.
SELECT c.relname FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
WHERE i.indrelid = %(oid)s
UNION
SELECT s.relname FROM pg_depend d JOIN pg_class s ON s.oid = d.objid AND s.relkind = 'S'
WHERE d.classid = 'pg_class'::regclass AND d.refobjid = %(oid)s AND d.deptype = 'i';

-- name: fingerprint
-- The table's definition in one hash (columns, defaults, indexes, constraints, triggers but
-- the rebuild's own, policies, flags, grants, options, comments, statistics): taken when
-- its dump is, compared again under the swap's lock — DDL on the table meanwhile would
-- otherwise be lost with the old table. Column options without the stamp PostgreSQL 15.20
-- keeps there (pg_attver: not the schema's, see dumps.normalise_dump).
SELECT md5(concat_ws(' | ',
  (SELECT string_agg(concat_ws(',', attnum, attname, atttypid, atttypmod, attnotnull,
                               attisdropped, attstattarget, attacl,
                               ARRAY(SELECT o FROM unnest(attoptions) o
                                     WHERE o NOT LIKE 'pg\_attver=%%'), attcollation,
                               attidentity, attgenerated), ';' ORDER BY attnum)
   FROM pg_attribute WHERE attrelid = %(oid)s AND attnum > 0),
  (SELECT string_agg(concat_ws(',', adnum, pg_get_expr(adbin, adrelid)), ';' ORDER BY adnum)
   FROM pg_attrdef WHERE adrelid = %(oid)s),
  (SELECT string_agg(concat_ws(',', pg_get_indexdef(indexrelid), indisclustered, indisreplident), ';'
                     ORDER BY indexrelid::regclass::text)
   FROM pg_index WHERE indrelid = %(oid)s),
  (SELECT string_agg(concat_ws(',', conname, pg_get_constraintdef(oid), convalidated), ';'
                     ORDER BY conname)
   FROM pg_constraint WHERE conrelid = %(oid)s),
  (SELECT string_agg(concat_ws(',', tgname, tgenabled, pg_get_triggerdef(oid)), ';' ORDER BY tgname)
   FROM pg_trigger WHERE tgrelid = %(oid)s AND NOT tgisinternal
     AND tgname NOT IN ('queueguard_capture', 'queueguard_capture_truncate')),
  (SELECT string_agg(concat_ws(',', polname, polcmd, polpermissive, polroles,
                               pg_get_expr(polqual, polrelid),
                               pg_get_expr(polwithcheck, polrelid)), ';' ORDER BY polname)
   FROM pg_policy WHERE polrelid = %(oid)s),
  (SELECT concat_ws(',', relowner, relacl, reloptions, relrowsecurity, relforcerowsecurity,
                    relreplident, relpersistence, reltablespace, relam)
   FROM pg_class WHERE oid = %(oid)s),
  (SELECT string_agg(concat_ws(',', objsubid, description), ';' ORDER BY objsubid)
   FROM pg_description WHERE objoid = %(oid)s AND classoid = 'pg_class'::regclass),
  (SELECT string_agg(concat_ws(',', stxname, pg_get_statisticsobjdef(oid)), ';' ORDER BY stxname)
   FROM pg_statistic_ext WHERE stxrelid = %(oid)s),
  (SELECT string_agg(prpubid::text, ';' ORDER BY prpubid)
   FROM pg_publication_rel WHERE prrelid = %(oid)s)
));

-- name: constraint_kinds
SELECT conname, contype::text FROM pg_constraint WHERE conrelid = %(oid)s;

-- ---------------------------------------------------------------------------------------------
-- refusals: what a rebuild cannot carry across (read only)

-- name: uncarried_dependents
-- Objects depending on the table that neither its dump nor the swap recreates: its own
-- parts (indexes, constraints, defaults, triggers, policies, statistics, publication rows,
-- owned sequences, row type), views (CREATE OR REPLACE VIEW) and foreign keys of ordinary
-- tables pointing at it are carried; anything else is named.
SELECT DISTINCT CASE
         WHEN d.classid = 'pg_rewrite'::regclass AND v.relkind = 'm'
           THEN format('materialized view %%I.%%I', vn.nspname, v.relname)
         WHEN d.classid = 'pg_rewrite'::regclass
           THEN pg_describe_object(d.classid, d.objid, 0) || ' (a rule)'
         WHEN d.classid = 'pg_proc'::regclass
           THEN pg_describe_object(d.classid, d.objid, 0) || ' (a SQL-standard body naming the table)'
         ELSE pg_describe_object(d.classid, d.objid, d.objsubid)
       END
FROM pg_depend d
LEFT JOIN pg_rewrite r ON d.classid = 'pg_rewrite'::regclass AND r.oid = d.objid
LEFT JOIN pg_class v ON v.oid = r.ev_class
LEFT JOIN pg_namespace vn ON vn.oid = v.relnamespace
WHERE d.refclassid = 'pg_class'::regclass AND d.refobjid = %(oid)s
  AND NOT (
       (d.classid = 'pg_class'::regclass AND d.deptype IN ('a', 'i'))
    OR (d.classid = 'pg_type'::regclass AND d.deptype = 'i')
    OR (d.classid = 'pg_attrdef'::regclass
        AND EXISTS (SELECT FROM pg_attrdef x WHERE x.oid = d.objid AND x.adrelid = %(oid)s))
    OR (d.classid = 'pg_policy'::regclass
        AND EXISTS (SELECT FROM pg_policy x WHERE x.oid = d.objid AND x.polrelid = %(oid)s))
    OR (d.classid = 'pg_statistic_ext'::regclass
        AND EXISTS (SELECT FROM pg_statistic_ext x WHERE x.oid = d.objid AND x.stxrelid = %(oid)s))
    OR d.classid = 'pg_publication_rel'::regclass
    OR (d.classid = 'pg_constraint'::regclass
        AND EXISTS (SELECT FROM pg_constraint x JOIN pg_class xc ON xc.oid = x.conrelid
                    WHERE x.oid = d.objid AND (x.conrelid = %(oid)s
                       OR (x.contype = 'f' AND x.conparentid = 0 AND xc.relkind = 'r'))))
    OR (d.classid = 'pg_trigger'::regclass
        AND EXISTS (SELECT FROM pg_trigger x WHERE x.oid = d.objid
                    AND (x.tgrelid = %(oid)s OR (x.tgisinternal AND EXISTS (
                         SELECT FROM pg_constraint f WHERE f.oid = x.tgconstraint
                         AND f.contype = 'f' AND f.confrelid = %(oid)s)))))
    OR (d.classid = 'pg_rewrite'::regclass AND v.relkind = 'v' AND r.rulename = '_RETURN')
  )
ORDER BY 1;

-- name: row_type_users
-- Objects built on the table's row type or its array (another table's column, a function's
-- signature, a composite type, a domain): the shadow has a new row type.
SELECT DISTINCT pg_describe_object(d.classid, d.objid, d.objsubid)
FROM pg_depend d
WHERE d.refclassid = 'pg_type'::regclass AND d.refobjid IN (%(rowtype)s, %(arraytype)s)
  AND NOT (d.classid = 'pg_type'::regclass AND d.objid = %(arraytype)s)
  AND NOT (d.classid = 'pg_class'::regclass AND d.objid = %(oid)s)
ORDER BY 1;

-- name: extension_of
SELECT e.extname FROM pg_depend d JOIN pg_extension e ON e.oid = d.refobjid
WHERE d.classid = 'pg_class'::regclass AND d.objid = %(oid)s
  AND d.refclassid = 'pg_extension'::regclass AND d.deptype = 'e';

-- name: inheritance
SELECT format('%%I.%%I', n.nspname, c.relname),
       CASE WHEN i.inhrelid = %(oid)s THEN 'parent' ELSE 'child' END
FROM pg_inherits i
JOIN pg_class c ON c.oid = CASE WHEN i.inhrelid = %(oid)s THEN i.inhparent ELSE i.inhrelid END
JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE i.inhrelid = %(oid)s OR i.inhparent = %(oid)s
ORDER BY 1;

-- name: all_tables_publications
-- A FOR ALL TABLES publication would publish the shadow and the log.
SELECT pubname FROM pg_publication WHERE puballtables ORDER BY 1;

-- name: trigger_names
SELECT tgname FROM pg_trigger WHERE tgrelid = %(oid)s;

-- ---------------------------------------------------------------------------------------------
-- The shadow

-- name: schema_exists
SELECT to_regnamespace(%(schema)s) IS NOT NULL;

-- name: shadow_columns
-- The shadow's attributes after the statement: which are copied (and from which live
-- column, by attnum), which compute themselves (generated) and which the statement added.
SELECT a.attnum, a.attname, a.attisdropped, a.attgenerated <> '', a.attidentity <> '',
       format_type(a.atttypid, a.atttypmod),
       CASE WHEN a.attcollation <> 0 AND a.attcollation <> ty.typcollation
            THEN format('%%I.%%I', cn.nspname, co.collname) END
FROM pg_attribute a
LEFT JOIN pg_type ty ON ty.oid = a.atttypid
LEFT JOIN pg_collation co ON co.oid = a.attcollation
LEFT JOIN pg_namespace cn ON cn.oid = co.collnamespace
WHERE a.attrelid = to_regclass(%(shadow)s) AND a.attnum > 0
ORDER BY a.attnum;

-- name: added_defaults
-- Defaults of the columns the statement added (generated ones are no defaults).
SELECT a.attname, pg_get_expr(ad.adbin, ad.adrelid)
FROM pg_attrdef ad
JOIN pg_attribute a ON a.attrelid = ad.adrelid AND a.attnum = ad.adnum
WHERE ad.adrelid = to_regclass(%(shadow)s) AND a.attnum > %(after)s AND a.attgenerated = ''
ORDER BY a.attnum;

-- name: volatile_functions
-- Of the function names a default calls, those with a volatile overload (pg_depend holds
-- no row for a built-in function, so the names are looked up).
SELECT DISTINCT proname FROM pg_proc WHERE proname = ANY(%(names)s) AND provolatile = 'v';

-- name: survivors
-- What of the table's dump is still there after the statement ran on the probe's complete
-- empty shadow: a statement that drops a column drops its indexes, constraints, triggers.
SELECT 'index', c.relname FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
WHERE i.indrelid = to_regclass(%(shadow)s)
UNION ALL
SELECT 'constraint', conname FROM pg_constraint WHERE conrelid = to_regclass(%(shadow)s)
UNION ALL
SELECT 'trigger', tgname FROM pg_trigger WHERE tgrelid = to_regclass(%(shadow)s)
UNION ALL
SELECT 'policy', polname FROM pg_policy WHERE polrelid = to_regclass(%(shadow)s);

-- name: reloptions
SELECT coalesce(c.reloptions, '{}'), coalesce(t.reloptions, '{}'), c.reltoastrelid <> 0
FROM pg_class c LEFT JOIN pg_class t ON t.oid = c.reltoastrelid
WHERE c.oid = to_regclass(%(table)s);

-- name: log_size
SELECT count(*) FROM queueguard_shadow.queueguard_log;

-- name: wraparound_vacuums
-- Anti-wraparound autovacuums of the given relations (those that exist): they never yield
-- their lock, so the swap, or the old table's DROP, would wait behind them.
SELECT p.pid, p.relid::regclass::text
FROM pg_stat_progress_vacuum p
JOIN pg_stat_activity a ON a.pid = p.pid
WHERE p.relid IN (SELECT to_regclass(r) FROM unnest(%(relations)s::text[]) AS r)
  AND a.query LIKE '%%to prevent wraparound%%';

-- name: ledger_exists
SELECT to_regclass('queueguard_shadow.queueguard_rebuild') IS NOT NULL;

-- name: ledger_create
-- Written by the swap: a rerun finds the statement swapped, with what is left to do.
CREATE TABLE queueguard_shadow.queueguard_rebuild (
    relation text NOT NULL,
    statement text NOT NULL,
    validations text[] NOT NULL
);

-- name: ledger_write
INSERT INTO queueguard_shadow.queueguard_rebuild VALUES (%s, %s, %s);

-- name: ledger_read
SELECT relation, statement, validations FROM queueguard_shadow.queueguard_rebuild;

-- name: own_foreign_keys
-- The table's own foreign keys (the old table's go in the swap).
SELECT quote_ident(conname) FROM pg_constraint WHERE conrelid = %(oid)s AND contype = 'f';

-- name: old_table
-- The old table the swap moved aside, to be dropped at the statement's end.
SELECT format('%%I.%%I', n.nspname, c.relname)
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = %(schema)s AND c.relkind = 'r';

-- ---------------------------------------------------------------------------------------------
-- The swap: what is recreated from the catalog (search_path empty: every name qualified)

-- name: dependent_views
-- Views reading the table directly: their query trees hold its OID.
SELECT DISTINCT format('%%I.%%I', n.nspname, v.relname), pg_get_viewdef(v.oid),
       coalesce(v.reloptions, '{}')
FROM pg_depend d
JOIN pg_rewrite r ON d.classid = 'pg_rewrite'::regclass AND r.oid = d.objid
JOIN pg_class v ON v.oid = r.ev_class AND v.relkind = 'v'
JOIN pg_namespace n ON n.oid = v.relnamespace
WHERE d.refclassid = 'pg_class'::regclass AND d.refobjid = %(oid)s AND v.oid <> %(oid)s
ORDER BY 1;

-- name: incoming_foreign_keys
-- Foreign keys of other tables pointing at the table: dropped before the old table goes,
-- added again NOT VALID and validated after the swap.
SELECT format('%%I.%%I', n.nspname, c.relname), quote_ident(f.conname),
       pg_get_constraintdef(f.oid), f.convalidated,
       obj_description(f.oid, 'pg_constraint')
FROM pg_constraint f
JOIN pg_class c ON c.oid = f.conrelid
JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE f.contype = 'f' AND f.confrelid = %(oid)s AND f.conrelid <> %(oid)s
ORDER BY c.oid, f.conname;

-- name: referenced_tables
-- Tables the table's own foreign keys point at (the swap drops the old table's keys and
-- adds the new one's: ACCESS EXCLUSIVE on each, taken up front).
SELECT DISTINCT format('%%I.%%I', n.nspname, c.relname)
FROM pg_constraint f
JOIN pg_class c ON c.oid = f.confrelid
JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE f.contype = 'f' AND f.conrelid = %(oid)s AND f.confrelid <> %(oid)s
ORDER BY 1;

-- name: publications
-- The table's publication rows, with their column lists and row filters (PostgreSQL 15+).
SELECT quote_ident(p.pubname),
       (SELECT string_agg(quote_ident(a.attname), ', ' ORDER BY k.ord)
        FROM unnest(r.prattrs::int2[]) WITH ORDINALITY AS k(attnum, ord)
        JOIN pg_attribute a ON a.attrelid = r.prrelid AND a.attnum = k.attnum),
       pg_get_expr(r.prqual, r.prrelid)
FROM pg_publication_rel r JOIN pg_publication p ON p.oid = r.prpubid
WHERE r.prrelid = %(oid)s
ORDER BY p.pubname;

-- name: statistics_objects
-- Extended statistics (pg_dump --table leaves them out): recreated after the old table,
-- which takes them along, is gone. `columns`: the plain columns they cover.
SELECT format('%%I.%%I', n.nspname, s.stxname), pg_get_statisticsobjdef(s.oid),
       quote_ident(pg_get_userbyid(s.stxowner)), s.stxstattarget::int,
       obj_description(s.oid, 'pg_statistic_ext'),
       ARRAY(SELECT a.attname::text FROM unnest(s.stxkeys::int2[]) k(attnum)
             JOIN pg_attribute a ON a.attrelid = s.stxrelid AND a.attnum = k.attnum)
FROM pg_statistic_ext s JOIN pg_namespace n ON n.oid = s.stxnamespace
WHERE s.stxrelid = %(oid)s
ORDER BY s.stxname;

-- name: sequence_state
SELECT last_value, is_called FROM {sequence};

-- name: set_sequence
SELECT setval(pg_get_serial_sequence(%(table)s, %(column)s), %(value)s, %(called)s);

-- ---------------------------------------------------------------------------------------------
-- Change capture, fill and replay: templates, their braces filled with quoted names and SQL
-- the rebuild composes from the catalog (rebuild_copy.py)

-- name: log_create
-- The keys of changed rows in the live table's types: k0, k1, … the row's key, o0, o1, …
-- its key before an UPDATE moved it (one entry, so no batch takes half a move); all NULL:
-- a TRUNCATE.
CREATE TABLE queueguard_shadow.queueguard_log (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    {columns}
) WITH (autovacuum_enabled = false, toast.autovacuum_enabled = false);

-- name: capture_function
-- SECURITY DEFINER: the application's roles write the log without any right on it.
CREATE FUNCTION queueguard_shadow.queueguard_capture() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $capture$
BEGIN
    IF TG_OP = 'TRUNCATE' THEN
        INSERT INTO queueguard_shadow.queueguard_log DEFAULT VALUES;
    ELSIF TG_OP = 'DELETE' THEN
        INSERT INTO queueguard_shadow.queueguard_log ({keys}) VALUES ({old});
    ELSIF TG_OP = 'UPDATE' AND ROW({old}) IS DISTINCT FROM ROW({new}) THEN
        INSERT INTO queueguard_shadow.queueguard_log ({keys}, {moved}) VALUES ({new}, {old});
    ELSE
        INSERT INTO queueguard_shadow.queueguard_log ({keys}) VALUES ({new});
    END IF;
    RETURN NULL;
END
$capture$;

-- name: capture_triggers
-- ENABLE ALWAYS: a logical replication apply worker (session_replication_role = replica)
-- writes the table too, and every writer must be captured.
CREATE TRIGGER queueguard_capture AFTER INSERT OR UPDATE OR DELETE ON {table}
    FOR EACH ROW EXECUTE FUNCTION queueguard_shadow.queueguard_capture();
CREATE TRIGGER queueguard_capture_truncate AFTER TRUNCATE ON {table}
    FOR EACH STATEMENT EXECUTE FUNCTION queueguard_shadow.queueguard_capture();
ALTER TABLE {table} ENABLE ALWAYS TRIGGER queueguard_capture,
    ENABLE ALWAYS TRIGGER queueguard_capture_truncate;

-- name: shadow_build_workers
-- Before the memory is raised: no more parallel workers for a shadow index build (SET LOCAL)
-- than the session's maintenance_work_mem gives a build — PostgreSQL plans a worker only
-- while every participant, the leader too, has 32 MB of it. The shadow's extra memory keeps
-- each sort off temporary files; it must not also add processes beside the application's on
-- the server's cores (a writer's wait is its statement's latency, whatever the cause).
SELECT set_config('max_parallel_maintenance_workers',
                  least(current_setting('max_parallel_maintenance_workers')::int,
                        greatest(0, pg_size_bytes(current_setting('maintenance_work_mem'))
                                    / (32 * 1024 * 1024) - 1))::text,
                  true);

-- name: shadow_index_memory
-- maintenance_work_mem for a shadow index build (SET LOCAL), never lowered.
SELECT set_config('maintenance_work_mem', %(memory)s, true)
WHERE pg_size_bytes(current_setting('maintenance_work_mem')) < pg_size_bytes(%(memory)s);

-- name: shadow_sort_memory
-- work_mem for the deduplication's one sort of the filled shadow (SET LOCAL), never lowered:
-- the sort in memory, not in passes over temporary files beside the writers' reads.
SELECT set_config('work_mem', %(memory)s, true)
WHERE pg_size_bytes(current_setting('work_mem')) < pg_size_bytes(%(memory)s);

-- name: fill_pages
-- The table's pages when the fill begins.
SELECT pg_relation_size(%(oid)s::regclass) / current_setting('block_size')::bigint;

-- name: fill_batch
-- The rows of a range of the table's pages, read in order (a TID range scan).
INSERT INTO {shadow} ({columns}) OVERRIDING SYSTEM VALUE
SELECT {expressions} FROM ONLY {table} WHERE ctid >= %(lo)s::tid AND ctid < %(hi)s::tid;

-- name: fill_hint
-- The shadow's pages from `from` to its end read once, right after the batch that wrote them
-- committed: the read sets its rows' hint bits while the pages are still dirty in shared
-- buffers, written once. Left to the first scan after the fill (ANALYZE, the deduplication),
-- every page is dirtied and written again, and on a server with data checksums (PostgreSQL
-- 18's default) or wal_log_hints each page filled before the last checkpoint becomes a
-- full-page image in the WAL: up to the table's size of WAL in seconds, beside the writers'
-- commits. Returns the shadow's pages now.
SELECT count(*), pg_relation_size(%(shadow)s::regclass) / current_setting('block_size')::bigint
FROM {shadow} WHERE ctid >= %(from)s::tid;

-- name: fill_duplicates
-- Every copy but the first of each key the shadow holds twice, gone (which one stays does
-- not matter: the log holds the key, and the replay puts the live row in its place). No
-- join for the planner to misjudge: the copies are numbered in one sorted pass over the
-- shadow and the extra ones fetched by ctid (a TID scan). A join of the shadow with its own
-- grouped keys, planned on a shadow never analysed, was once a nested loop re-reading the
-- groups for every row: quadratic, 21 minutes at 250 k rows.
DELETE FROM {shadow} WHERE ctid = ANY (ARRAY(
    SELECT ctid
    FROM (SELECT ctid, row_number() OVER (PARTITION BY {key} ORDER BY ctid) AS copy
          FROM {shadow}) numbered
    WHERE copy > 1
));

-- name: analyze
-- The shadow's statistics, taken once it is filled: every later query on it (the replays,
-- the swap's checks, the validations after it) is planned on what it holds.
ANALYZE {shadow};

-- name: replay_take
-- A batch of logged keys, taken off the log in the order they were logged. Only rows this
-- snapshot sees are taken: a writer that has not committed yet keeps its row for later.
DELETE FROM queueguard_shadow.queueguard_log
WHERE id IN (SELECT id FROM queueguard_shadow.queueguard_log ORDER BY id LIMIT %(limit)s)
RETURNING {key_text};

-- name: replay_delete
-- The shadow's rows of those keys (the shadow's key computed from the logged one, as the
-- statement converts it).
DELETE FROM {shadow} WHERE ({shadow_key}) IN (
    SELECT {shadow_key_expressions}
    FROM (SELECT {logged_key} FROM unnest({arrays}) AS u({slots})) AS {alias}
);

-- name: replay_insert
-- …and the live rows of those keys as they are now: the replay is idempotent.
INSERT INTO {shadow} ({columns}) OVERRIDING SYSTEM VALUE
SELECT {expressions} FROM ONLY {table}
WHERE ({key}) IN (SELECT {logged_key} FROM unnest({arrays}) AS u({slots}));

-- name: replay_truncate
DELETE FROM {shadow};

-- name: status
-- Where a rebuild stands, for `status --migrations` (read only, estimates from the
-- statistics): swapped (the ledger exists), the shadow's and the live table's rows, the
-- changes logged and not yet replayed.
SELECT to_regclass('queueguard_shadow.queueguard_rebuild') IS NOT NULL,
       (SELECT n_live_tup FROM pg_stat_user_tables
         WHERE schemaname = 'queueguard_shadow' AND relname = %(name)s),
       (SELECT reltuples::bigint FROM pg_class WHERE oid = to_regclass(%(table)s)),
       (SELECT n_live_tup FROM pg_stat_user_tables
         WHERE schemaname = 'queueguard_shadow' AND relname = 'queueguard_log');
