-- The backends of an earlier `upgrade --online` in this database (other than ours).

-- name: runner_backends
SELECT pid, application_name, state, left(query, 200)
FROM pg_stat_activity
WHERE datname = current_database() AND pid <> pg_backend_pid()
  AND application_name LIKE %(prefix)s AND state IS DISTINCT FROM 'idle';

-- name: terminate
SELECT pg_terminate_backend(%(pid)s);
