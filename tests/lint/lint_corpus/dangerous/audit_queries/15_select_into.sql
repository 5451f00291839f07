-- expect: audit.not_read_only
-- SELECT … INTO creates a table.
SELECT * INTO tasks_copy FROM tasks;
