-- check:    runtime.activity_hidden (info)
-- applies-to: 001 002 003
-- guard:    no (advisory: preflight only)
-- What:     sessions in this database whose state, transaction start and backend start are
--           hidden from the role running the audit (other roles' sessions, without membership
--           in pg_read_all_stats). runtime.older_hosts still sees their application names, but
--           locks.long_transaction cannot tell how old their transactions are: grant
--           pg_read_all_stats (or pg_monitor) to the audit role for a complete picture.
-- Cost:     reads pg_stat_activity (shared memory; no table is read).
-- Locks:    none. Read-only; no row when every session is visible.
WITH hidden AS (
    SELECT a.pid, a.application_name, a.usename,
           row_number() OVER (ORDER BY a.pid) AS n
    FROM pg_stat_activity AS a
    WHERE a.datname = current_database()
      AND a.pid <> pg_backend_pid()
      AND a.backend_start IS NULL
)
SELECT 'runtime.activity_hidden' AS code,
       'info' AS severity,
       current_database()::text AS object,
       count(*) AS count,
       coalesce(jsonb_agg(jsonb_build_object('pid', pid, 'applicationName', application_name,
                                             'user', usename) ORDER BY n)
                FILTER (WHERE n <= coalesce(nullif(current_setting('queueguard.samples', true),
                                                   ''), '10')::int),
                '[]'::jsonb) AS samples
FROM hidden
HAVING count(*) > 0;
