-- expect: squawk.renaming-column
-- Renaming breaks every running worker that names the column.
SET lock_timeout = '5s';
SET statement_timeout = '60s';
ALTER TABLE tasks RENAME COLUMN data TO payload;
