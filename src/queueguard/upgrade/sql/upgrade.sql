-- Statements of the upgrade runner (outside the revisions themselves).

-- name: try_lock
-- One upgrade runner at a time per database (session-level advisory lock).
SELECT pg_try_advisory_lock(hashtext('queueguard-upgrade'));

-- name: unlock
SELECT pg_advisory_unlock(hashtext('queueguard-upgrade'));

-- name: older_hosts
-- Runtime hosts announce `queueguard/<protocol> host=<id>` as application_name.
SELECT application_name, backend_start
FROM pg_stat_activity
WHERE datname = current_database()
  AND application_name ~ '^queueguard/[0-9]+ '
  AND substring(application_name FROM '^queueguard/([0-9]+) ')::int < %(protocol)s
ORDER BY backend_start;

-- name: auto_backlog
-- Rows 004 will relocate, per legacy auto queue (read before 004 runs, for the report).
SELECT t.physical_queue, count(*)
FROM tasks t JOIN task_queues q USING (physical_queue)
WHERE q.version = 'auto'
GROUP BY t.physical_queue
ORDER BY t.physical_queue;

-- name: queue_count
SELECT count(*) FROM task_queues;

-- name: our_tables
-- Tables of a released schema in a database without a version table (unknown revision).
SELECT string_agg(tablename, ', ' ORDER BY tablename)
FROM pg_tables
WHERE schemaname = current_schema()
  AND tablename = ANY(%(tables)s);
