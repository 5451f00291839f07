-- Statements of the upgrade runner (outside the revisions themselves).

-- name: current_version
-- The version row, re-read under the runner lock (no row: nothing applied yet).
SELECT version_num FROM queueguard_version;

-- name: rollout_exists
-- Is an online rollout (`upgrade --online`) in progress? (its record exists only meanwhile)
SELECT to_regclass('queueguard_rollout') IS NOT NULL;

-- name: rollout
SELECT target, phase FROM queueguard_rollout ORDER BY target LIMIT 1;

-- name: dead_client_check
-- Transaction-scoped: the server checks every second that the runner is still there.
SELECT set_config('client_connection_check_interval', '1s', true)
WHERE current_setting('server_version_num')::int >= 140000;

-- name: version_table
-- The version table, created under the runner lock before Alembic's first revision (as
-- Alembic would create it): two runners on an empty database cannot race to create it.
CREATE TABLE IF NOT EXISTS queueguard_version (
    version_num varchar(32) NOT NULL,
    CONSTRAINT queueguard_version_pkc PRIMARY KEY (version_num)
);

-- name: queue_count
SELECT count(*) FROM task_queues;
