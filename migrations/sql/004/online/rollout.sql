-- 004 online: the rollout record and the migrator's lease (queueguard.queue_schema.online.rollout).

-- name: table
-- One row per target revision while its rollout is in progress; dropped by contract. The
-- lease is a holder and an expiry taken in every batch's own transaction (the row lock
-- serialises two migrators; the expiry lets a rerun take over from a killed one), so
-- exclusion holds through a transaction pooler and nothing outlives a transaction.
CREATE TABLE IF NOT EXISTS queueguard_rollout (
    target text COLLATE "C" PRIMARY KEY,
    phase text NOT NULL CHECK (phase IN ('expand', 'migrate', 'contract', 'closing', 'aborting')),
    started_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now(),
    holder text,
    lease_until timestamptz,
    rows_done bigint NOT NULL DEFAULT 0 CHECK (rows_done >= 0),
    migrate_seconds double precision NOT NULL DEFAULT 0 CHECK (migrate_seconds >= 0)
);

-- name: create
INSERT INTO queueguard_rollout (target, phase) VALUES (%(target)s, 'expand')
ON CONFLICT (target) DO NOTHING;

-- name: read
SELECT phase, started_at, updated_at, holder, lease_until, rows_done, migrate_seconds,
       lease_until > now() AS leased
FROM queueguard_rollout WHERE target = %(target)s;

-- name: take_lease
-- Take or renew the lease (free, expired or already ours). No row back: another migrator
-- holds it, or is inside a batch right now (SKIP LOCKED: never queue behind it). The row lock
-- stays until this transaction ends, so two migrators' batches never interleave.
WITH mine AS (
    SELECT target FROM queueguard_rollout WHERE target = %(target)s FOR UPDATE SKIP LOCKED
)
UPDATE queueguard_rollout r
SET holder = %(holder)s, lease_until = now() + make_interval(secs => %(lease_s)s)
FROM mine
WHERE r.target = mine.target
  AND (r.holder IS NULL OR r.holder = %(holder)s OR r.lease_until <= now())
RETURNING r.phase;

-- name: release_lease
UPDATE queueguard_rollout SET holder = NULL, lease_until = NULL
WHERE target = %(target)s AND holder = %(holder)s;

-- name: set_phase
-- Hand over to the next phase (only from the phases given, only by the lease holder).
UPDATE queueguard_rollout SET phase = %(phase)s, updated_at = now()
WHERE target = %(target)s AND phase = ANY(%(from_phases)s) AND holder = %(holder)s;

-- name: progress
UPDATE queueguard_rollout
SET rows_done = rows_done + %(rows)s, migrate_seconds = migrate_seconds + %(seconds)s,
    updated_at = now()
WHERE target = %(target)s;

-- name: lock_protocol
-- Every load's handshake reads runtime_protocol first: lock it first (no deadlock with a
-- load), and a load that passed its handshake holds it until its commit.
LOCK TABLE runtime_protocol IN ACCESS EXCLUSIVE MODE;

-- name: hosts_of_protocol
-- Hosts connected to this database that announce `protocol` (their application_name, see
-- docs/interfaces.md).
SELECT DISTINCT application_name FROM pg_stat_activity
WHERE datname = current_database()
  AND application_name LIKE 'queueguard/' || %(protocol)s::text || ' %%'
ORDER BY 1;

-- name: drop_owner
-- The per-queue refusal goes with the window (contract closes it, abort reopens [3, 3]):
-- catalog-only, a brief ACCESS EXCLUSIVE on task_queues at the end of a short transaction.
ALTER TABLE task_queues
    DROP CONSTRAINT IF EXISTS queue_owned_by_protocol_4,
    DROP COLUMN IF EXISTS protocol4_range;

-- name: drop_marker_index
DROP INDEX CONCURRENTLY IF EXISTS queueguard_rollout_pending_directive;

-- name: drop_table
DROP TABLE IF EXISTS queueguard_rollout;

-- name: owner_column_exists
SELECT count(*) FROM pg_attribute
WHERE attrelid = 'task_queues'::regclass AND attname = 'protocol4_range' AND NOT attisdropped;
