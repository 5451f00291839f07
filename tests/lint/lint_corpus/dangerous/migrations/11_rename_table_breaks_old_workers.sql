-- expect: squawk.renaming-table
-- Renaming breaks every running worker that names the table.
SET lock_timeout = '5s';
SET statement_timeout = '60s';
ALTER TABLE tasks RENAME TO task_rows;
