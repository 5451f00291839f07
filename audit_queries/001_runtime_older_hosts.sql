-- check:    runtime.older_hosts (warning)
-- applies-to: 001 002 003
-- guard:    no (advisory: preflight only; `queueguard upgrade` refuses on its own while they
--           are connected, unless --force)
-- What:     runtime hosts of an older protocol still connected to this database: every host
--           sets application_name `queueguard/<protocol> host=<id>`, and a protocol below
--           queueguard.protocol (required: the protocol the target revision requires) is older. Stop them before upgrading:
--           after 004 they fail at their next range-checked write or queue load anyway.
--           Backend start times and addresses of other roles' sessions are only visible to
--           members of pg_read_all_stats (NULL otherwise).
-- Cost:     reads pg_stat_activity (shared memory; no table is read).
-- Locks:    none. Read-only; no row when no older host is connected.
WITH hosts AS (
    SELECT a.pid, a.application_name, a.backend_start, a.client_addr, a.usename,
           substring(a.application_name FROM '^queueguard/([0-9]+) ')::int AS protocol
    FROM pg_stat_activity AS a
    WHERE a.datname = current_database()
      AND a.pid <> pg_backend_pid()
      AND a.application_name ~ '^queueguard/[0-9]+ '
), older AS (
    SELECT h.*, row_number() OVER (ORDER BY h.backend_start NULLS LAST, h.pid) AS n
    FROM hosts AS h
    WHERE h.protocol < current_setting('queueguard.protocol')::int
)
SELECT 'runtime.older_hosts' AS code,
       'warning' AS severity,
       current_database()::text AS object,
       count(*) AS count,
       coalesce(jsonb_agg(jsonb_build_object(
                    'applicationName', application_name, 'protocol', protocol, 'pid', pid,
                    'backendStart', backend_start, 'clientAddr', client_addr::text,
                    'user', usename) ORDER BY n)
                FILTER (WHERE n <= coalesce(nullif(current_setting('queueguard.samples', true),
                                                   ''), '10')::int),
                '[]'::jsonb) AS samples
FROM older
HAVING count(*) > 0;
