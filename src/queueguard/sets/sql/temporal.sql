-- Temporal's bookkeeping tables, as `temporal-sql-tool` (PostgreSQL plugin) creates, reads and
-- writes them. The DDL is the tool's own, character for character in meaning (column names,
-- types, NOT NULLs, primary keys; its SQL sits in the upstream file
-- common/persistence/sql/sqlplugin/postgresql/admin.go). The writes differ only in where the
-- timestamps come from: the tool passes its host's time.Now().UTC(); these use the server's
-- clock_timestamp() in UTC (docs/migration-sets.md "Temporal").

-- name: create_schema_version
CREATE TABLE IF NOT EXISTS schema_version(
    version_partition INT not null,
    db_name VARCHAR(255) not null,
    creation_time TIMESTAMP,
    curr_version VARCHAR(64),
    min_compatible_version VARCHAR(64),
    PRIMARY KEY (version_partition, db_name));

-- name: create_schema_update_history
CREATE TABLE IF NOT EXISTS schema_update_history(
    version_partition INT not null,
    year int not null,
    month int not null,
    update_time TIMESTAMP not null,
    description VARCHAR(255),
    manifest_md5 VARCHAR(64),
    new_version VARCHAR(64),
    old_version VARCHAR(64),
    PRIMARY KEY (version_partition, year, month, update_time));

-- name: version_table_exists
-- The tool reads the tables unqualified, so they are whichever the search_path finds first.
SELECT to_regclass('schema_version') IS NOT NULL;

-- name: read_version
-- The tool keys on its --db argument, the database it connected to: current_database().
SELECT curr_version FROM schema_version
WHERE version_partition = 0 AND db_name = current_database();

-- name: other_versions
-- The rows of other databases' names: a database restored under another name keeps its
-- original's row, keyed on the name it was made under.
SELECT db_name, curr_version FROM schema_version
WHERE version_partition = 0 AND db_name <> current_database()
ORDER BY db_name;

-- name: take_over_version
-- A copy restored under another name takes over its original's version row.
UPDATE schema_version SET db_name = current_database()
WHERE version_partition = 0 AND db_name = %(db_name)s;

-- name: write_version
-- The tool's upsert (UpdateSchemaVersion): creation_time is rewritten on every step.
INSERT INTO schema_version(version_partition, db_name, creation_time, curr_version,
                           min_compatible_version)
VALUES (0, current_database(), clock_timestamp() AT TIME ZONE 'UTC',
        %(curr_version)s, %(min_compatible_version)s)
ON CONFLICT (version_partition, db_name) DO UPDATE
    SET creation_time = excluded.creation_time,
        curr_version = excluded.curr_version,
        min_compatible_version = excluded.min_compatible_version;

-- name: write_history
-- One row per step (WriteSchemaUpdateLog): year and month are those of update_time, in UTC.
-- update_time is in the primary key, so it is made later than every row already there: two
-- steps inside one transaction (or one microsecond) still get distinct keys, and the rows'
-- order is the order they were written in.
WITH stamp AS (
    SELECT greatest(clock_timestamp() AT TIME ZONE 'UTC',
                    (SELECT max(update_time) + interval '1 microsecond'
                     FROM schema_update_history WHERE version_partition = 0)) AS at
)
INSERT INTO schema_update_history(version_partition, year, month, update_time, old_version,
                                  new_version, manifest_md5, description)
SELECT 0, extract(year FROM at)::int, extract(month FROM at)::int, at,
       %(old_version)s, %(new_version)s, %(manifest_md5)s, %(description)s
FROM stamp;
