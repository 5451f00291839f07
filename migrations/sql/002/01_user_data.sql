-- 002 (v0.2): per-family user data with its own version. Released; frozen history.
CREATE TABLE task_queue_user_data (
    namespace text NOT NULL,
    task_queue text NOT NULL,
    version bigint NOT NULL,
    data jsonb NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (namespace, task_queue)
);
