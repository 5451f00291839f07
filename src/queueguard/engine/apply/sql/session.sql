-- The runner's bookkeeping of its own: the progress of a revision split by a statement that
-- must run outside a transaction (the runner lock is runner_lock.sql's).

-- name: progress_exists
SELECT to_regclass('queueguard_progress') IS NOT NULL;

-- name: progress_create
-- Created in a revision's first transaction when it has to commit half way (a statement
-- that cannot run in a transaction block), dropped in its bookkeeping transaction.
-- `forms`, `step`: the online forms (JSON) of the statement in flight and how many of them
-- are done (`upgrade --online`), so a rerun finishes that statement the way it was begun.
-- `statements`: the revision's statements (JSON), for a revision whose SQL is known only by
-- a run (a Django migration as the SQL its migrate sent): a rerun resumes with them.
CREATE TABLE IF NOT EXISTS queueguard_progress (
    revision text PRIMARY KEY,
    statement int NOT NULL,
    sha256 text NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now(),
    forms text,
    step int NOT NULL DEFAULT 0,
    statements text
);

-- name: progress_columns
-- A table an earlier queueguard created (before --online) gets the columns too.
ALTER TABLE queueguard_progress
    ADD COLUMN IF NOT EXISTS forms text, ADD COLUMN IF NOT EXISTS step int NOT NULL DEFAULT 0,
    ADD COLUMN IF NOT EXISTS statements text;

-- name: progress_read
SELECT revision, statement, sha256 FROM queueguard_progress;

-- name: progress_write
INSERT INTO queueguard_progress (revision, statement, sha256, forms, step, statements)
VALUES (%(revision)s, %(statement)s, %(sha256)s, %(forms)s, 0, %(statements)s)
ON CONFLICT (revision) DO UPDATE SET
    statement = excluded.statement, updated_at = now(), forms = excluded.forms,
    statements = excluded.statements,
    -- the same statement in flight again (a rerun): keep how far its forms got
    step = CASE WHEN queueguard_progress.statement = excluded.statement
                 AND queueguard_progress.forms IS NOT DISTINCT FROM excluded.forms
                THEN queueguard_progress.step ELSE 0 END;

-- name: progress_step
UPDATE queueguard_progress SET step = %(step)s, updated_at = now()
WHERE revision = %(revision)s;

-- name: progress_forms
UPDATE queueguard_progress SET forms = %(forms)s, updated_at = now()
WHERE revision = %(revision)s;

-- name: progress_has_forms
-- A table an earlier queueguard created has no `forms` column: nothing can be in flight.
SELECT EXISTS (
    SELECT FROM pg_attribute
    WHERE attrelid = 'queueguard_progress'::regclass AND attname = 'forms' AND NOT attisdropped
);

-- name: progress_statements
-- The statements kept with a revision in progress (a table an earlier queueguard created
-- may not have the column: then none are).
SELECT revision, statements FROM queueguard_progress WHERE statements IS NOT NULL;

-- name: progress_has_statements
SELECT EXISTS (
    SELECT FROM pg_attribute
    WHERE attrelid = 'queueguard_progress'::regclass AND attname = 'statements'
      AND NOT attisdropped
);

-- name: progress_in_flight
-- The statement whose online forms were begun and not finished, if any.
SELECT revision, statement, forms, step FROM queueguard_progress WHERE forms IS NOT NULL;

-- name: progress_drop
DROP TABLE IF EXISTS queueguard_progress;

-- name: invalid_index
-- An index a failed concurrent build left behind (indisvalid false), by name.
SELECT c.oid::regclass::text
FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE NOT i.indisvalid AND c.relname = %(name)s AND n.nspname = ANY(current_schemas(false));
