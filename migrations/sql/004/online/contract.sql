-- 004 online, phase contract: close the window, fence what protocol-3 hosts may hold, migrate
-- what they wrote since migrate passed (migrate.sql's batches), record 004.

-- name: close_window
-- Under ACCESS EXCLUSIVE on runtime_protocol (rollout.sql lock_protocol, taken first): a v0.3
-- load that already passed its handshake holds runtime_protocol until it commits, so it
-- commits before this and is fenced below; every later one is refused by the handshake.
UPDATE runtime_protocol SET min_protocol = 4, max_protocol = 4;

-- name: fence_protocol3
-- Every queue not held by a protocol-4 host (never loaded by one in the window, or taken back
-- from one by the migrator): its v0.3 owner's next range-checked write fails. Queues a v0.4
-- host holds keep their range: their owners go on without a reload.
UPDATE task_queues SET range_id = range_id + 1
WHERE protocol4_range IS DISTINCT FROM range_id;

-- name: ledger_table
-- As offline 004 creates it (06_migration_ledger.sql); verify's online check compares the
-- whole catalog with a fresh install, so the two cannot drift apart.
CREATE TABLE IF NOT EXISTS queueguard_migrations (
    revision text PRIMARY KEY,
    sha256 text NOT NULL CHECK (sha256 ~ '^[0-9a-f]{64}$'),
    applied_at timestamptz NOT NULL DEFAULT now()
);

-- name: ledger_row
INSERT INTO queueguard_migrations (revision, sha256) VALUES (%(revision)s, %(sha256)s)
ON CONFLICT (revision) DO NOTHING;

-- name: record_version
UPDATE queueguard_version SET version_num = %(target)s WHERE version_num = %(previous)s;
