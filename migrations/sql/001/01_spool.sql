-- 001 (v0.1): History's tables and the delivery-id spool. Released; frozen history.
CREATE TABLE executions (
    run_id uuid PRIMARY KEY,
    namespace text NOT NULL,
    workflow_id text NOT NULL,
    status text NOT NULL
        CHECK (status IN ('running', 'completed', 'failed', 'terminated')),
    versioning_behavior text NOT NULL
        CHECK (versioning_behavior IN ('unversioned', 'auto_upgrade', 'pinned')),
    deployment_version text NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE scheduled_tasks (
    run_id uuid NOT NULL REFERENCES executions (run_id) ON DELETE CASCADE,
    scheduled_event_id bigint NOT NULL,
    kind text NOT NULL CHECK (kind IN ('workflow', 'activity')),
    started_at timestamptz NULL,
    PRIMARY KEY (run_id, scheduled_event_id)
);

CREATE TABLE tasks (
    delivery_id bigserial PRIMARY KEY,
    namespace text NOT NULL,
    task_queue text NOT NULL,
    task_type text NOT NULL CHECK (task_type IN ('workflow', 'activity')),
    partition int NOT NULL CHECK (partition >= 0),
    version text NOT NULL DEFAULT '',
    data jsonb NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);
