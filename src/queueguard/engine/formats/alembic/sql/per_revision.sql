-- Statements of the per-revision runner (outside the revisions themselves).

-- name: version_table_exists
SELECT to_regclass(%(table)s) IS NOT NULL;

-- name: version_table
-- The version table, created under the runner lock before Alembic's first revision (as
-- Alembic would create it): two runners on an empty database cannot race to create it.
CREATE TABLE IF NOT EXISTS {table} (
    version_num varchar(32) NOT NULL,
    CONSTRAINT {key} PRIMARY KEY (version_num)
);
