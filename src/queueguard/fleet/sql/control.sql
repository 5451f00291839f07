-- The control database of `queueguard fleet`: the runs, their frozen manifests, each
-- target's state and its lease. Every runner of a run reads and writes here; times are the
-- control database's clock (now()). A lease's fence is a fencing token, the rule a task
-- queue's range_id follows: each claim raises it, and every write names the fence it holds
-- and changes nothing when a later claim has raised it since (a runner that lost its lease
-- cannot overwrite its successor's work).

-- name: set_up
-- Whether the schema is in place as this version makes it (its last object, and the
-- columns later versions added): a runner joining a run others work then runs no DDL, whose
-- locks (even an IF NOT EXISTS one's) would queue the others' claims behind it.
SELECT to_regclass('queueguard_fleet.targets_to_claim') IS NOT NULL
   AND (SELECT count(*) FROM pg_attribute
        WHERE NOT attisdropped
          AND ((attrelid = to_regclass('queueguard_fleet.runs') AND attname = 'active_until')
            OR (attrelid = to_regclass('queueguard_fleet.targets') AND attname = 'refusal')))
       = 2;

-- name: setup_lock
-- Runners starting together create the schema once.
SELECT pg_advisory_xact_lock(hashtext('queueguard-fleet-setup'));

-- name: setup
CREATE SCHEMA IF NOT EXISTS queueguard_fleet;
CREATE TABLE IF NOT EXISTS queueguard_fleet.runs (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    -- the resolved targets and the target revision, hashed: who joins this run
    identity text NOT NULL,
    format text NOT NULL,
    head text,
    checksum text NOT NULL,
    target_revision text,
    created_at timestamptz NOT NULL DEFAULT now(),
    finished_at timestamptz,
    -- why the run claims nothing more (a wave's failure), NULL while it goes on
    stopped text,
    -- a runner of the run was alive until then (each heartbeat moves it on): a runner
    -- joining a run nobody works retries its failed targets, one joining a live run does not
    active_until timestamptz
);
CREATE TABLE IF NOT EXISTS queueguard_fleet.waves (
    run_id bigint NOT NULL REFERENCES queueguard_fleet.runs ON DELETE CASCADE,
    position int NOT NULL,
    name text NOT NULL,
    parallel int NOT NULL,
    on_error text NOT NULL,
    max_failures int,
    PRIMARY KEY (run_id, position)
);
CREATE TABLE IF NOT EXISTS queueguard_fleet.targets (
    run_id bigint NOT NULL REFERENCES queueguard_fleet.runs ON DELETE CASCADE,
    name text NOT NULL,
    position int NOT NULL,
    -- NULL for a target found after the run froze its manifest ('not in this run')
    wave int,
    dsn text NOT NULL,                 -- redacted: no password is ever stored here
    server text NOT NULL,
    database text NOT NULL,
    schema text,
    labels jsonb NOT NULL DEFAULT '{}',
    -- one target at a time in its database (a schema target whose set builds concurrently
    -- or reaches outside its schema)
    exclusive boolean NOT NULL DEFAULT false,
    state text NOT NULL DEFAULT 'pending' CHECK (state IN
        ('pending', 'running', 'done', 'failed', 'skipped', 'not in this run')),
    fence bigint NOT NULL DEFAULT 0,
    runner text,
    lease_expires timestamptz,
    attempts int NOT NULL DEFAULT 0,
    revision text,
    predicted_ms bigint,
    started_at timestamptz,
    finished_at timestamptz,
    elapsed_ms bigint,
    lock_waits int NOT NULL DEFAULT 0,
    error text,
    -- why a claim of it fails at once (fleet plan found a statement over --max-lock)
    refusal text,
    PRIMARY KEY (run_id, name)
);
-- columns later versions added, for a control database an earlier version made
ALTER TABLE queueguard_fleet.runs ADD COLUMN IF NOT EXISTS active_until timestamptz;
ALTER TABLE queueguard_fleet.targets ADD COLUMN IF NOT EXISTS refusal text;
-- the claim's order, over what is left to claim: a claim reads the next target, not the
-- whole wave (10,000 targets made every claim a sort of the rest)
CREATE INDEX IF NOT EXISTS targets_to_claim ON queueguard_fleet.targets
    (run_id, wave, predicted_ms DESC NULLS LAST, position)
    WHERE state IN ('pending', 'running');

-- name: analyze
-- The manifest just written, analysed: the claims are planned on what it holds.
ANALYZE queueguard_fleet.targets;

-- name: open_run
-- The newest unfinished run of this identity.
SELECT id, format, head, checksum, target_revision FROM queueguard_fleet.runs
WHERE identity = %(identity)s AND finished_at IS NULL
ORDER BY id DESC LIMIT 1;

-- name: run_by_id
SELECT id, format, head, checksum, target_revision FROM queueguard_fleet.runs
WHERE id = %(run)s;

-- name: newest_run
-- The newest run of this identity, finished or not (for status).
SELECT id, format, head, checksum, target_revision FROM queueguard_fleet.runs
WHERE identity = %(identity)s ORDER BY id DESC LIMIT 1;

-- name: create_run
INSERT INTO queueguard_fleet.runs (identity, format, head, checksum, target_revision)
VALUES (%(identity)s, %(format)s, %(head)s, %(checksum)s, %(target)s)
RETURNING id;

-- name: add_wave
INSERT INTO queueguard_fleet.waves (run_id, position, name, parallel, on_error, max_failures)
VALUES (%(run)s, %(position)s, %(name)s, %(parallel)s, %(on_error)s, %(max_failures)s);

-- name: add_target
INSERT INTO queueguard_fleet.targets
    (run_id, name, position, wave, dsn, server, database, schema, labels, exclusive, state)
VALUES (%(run)s, %(name)s, %(position)s, %(wave)s, %(dsn)s, %(server)s, %(database)s,
        %(schema)s, %(labels)s, %(exclusive)s, %(state)s)
ON CONFLICT (run_id, name) DO NOTHING;

-- name: waves
SELECT position, name, parallel, on_error, max_failures FROM queueguard_fleet.waves
WHERE run_id = %(run)s ORDER BY position;

-- name: manifest
SELECT name, wave, state FROM queueguard_fleet.targets WHERE run_id = %(run)s ORDER BY position;

-- name: lock_run
-- Claims of a run one at a time: the caps are counted and the claim made under this lock.
SELECT stopped FROM queueguard_fleet.runs WHERE id = %(run)s FOR UPDATE;

-- name: current_wave
-- The first wave with a target not yet finished; its live claims.
SELECT t.wave, w.parallel,
       count(*) FILTER (WHERE t.state = 'running' AND t.lease_expires > now())
FROM queueguard_fleet.targets t
JOIN queueguard_fleet.waves w ON w.run_id = t.run_id AND w.position = t.wave
WHERE t.run_id = %(run)s AND t.wave = (
    SELECT min(wave) FROM queueguard_fleet.targets
    WHERE run_id = %(run)s AND state IN ('pending', 'running'))
GROUP BY t.wave, w.parallel;

-- name: candidate
-- The next target of the wave: pending, or running on a lease that expired; the longest
-- predicted first; not on a server at its cap, nor in a database another claim holds
-- alone. The live claims are few (at most the wave's cap): they are read once, not once
-- per candidate (a fleet of 1,000 schemas made that quadratic).
WITH live AS (
    SELECT server, database, exclusive FROM queueguard_fleet.targets
    WHERE run_id = %(run)s AND state = 'running' AND lease_expires > now()
), per_server AS (
    SELECT server, count(*) AS claims FROM live GROUP BY server
)
SELECT t.name, t.state = 'running'
FROM queueguard_fleet.targets t
LEFT JOIN per_server s ON s.server = t.server
WHERE t.run_id = %(run)s AND t.wave = %(wave)s
  AND (t.state = 'pending' OR (t.state = 'running' AND t.lease_expires <= now()))
  AND coalesce(s.claims, 0) < coalesce((%(caps)s::jsonb ->> t.server)::int, 2147483647)
  AND NOT EXISTS (SELECT FROM live o
                  WHERE o.server = t.server AND o.database = t.database
                    AND (o.exclusive OR t.exclusive))
ORDER BY t.predicted_ms DESC NULLS LAST, t.position
LIMIT 1
FOR UPDATE OF t SKIP LOCKED;

-- name: predict
-- fleet plan's figures for a target of a new run: its predicted time, and the refusal its
-- claim meets when a statement is over --max-lock and the run is not online.
UPDATE queueguard_fleet.targets SET predicted_ms = %(predicted_ms)s, refusal = %(refusal)s
WHERE run_id = %(run)s AND name = %(name)s;

-- name: claim
UPDATE queueguard_fleet.targets
SET state = 'running', fence = fence + 1, runner = %(runner)s, attempts = attempts + 1,
    lease_expires = now() + make_interval(secs => %(ttl)s), started_at = now(),
    finished_at = NULL, error = NULL
WHERE run_id = %(run)s AND name = %(name)s
RETURNING fence, refusal;

-- name: renew
-- The lease extended, only under the fence it was claimed with.
UPDATE queueguard_fleet.targets SET lease_expires = now() + make_interval(secs => %(ttl)s)
WHERE run_id = %(run)s AND name = %(name)s AND fence = %(fence)s AND state = 'running';

-- name: alive
-- A runner of the run is alive; the run's stop, if any, for the targets it has in flight.
UPDATE queueguard_fleet.runs SET active_until = now() + make_interval(secs => %(ttl)s)
WHERE id = %(run)s
RETURNING stopped;

-- name: recorded
-- Whether a record whose answer was lost (the connection dropped) was made.
SELECT state, fence FROM queueguard_fleet.targets WHERE run_id = %(run)s AND name = %(name)s;

-- name: record
-- A claimed target's end (done, failed, pending again): nothing changes under a stale fence.
UPDATE queueguard_fleet.targets
SET state = %(state)s, revision = coalesce(%(revision)s, revision), error = %(error)s,
    finished_at = CASE WHEN %(state)s = 'pending' THEN NULL ELSE now() END,
    elapsed_ms = %(elapsed_ms)s, lock_waits = lock_waits + %(lock_waits)s,
    runner = NULL, lease_expires = NULL
WHERE run_id = %(run)s AND name = %(name)s AND fence = %(fence)s AND state = 'running';

-- name: done_unclaimed
-- Targets found at the target revision before anyone claimed them: done, with no claim, in
-- one statement for them all; the names it marked. Their rows are locked in name order, so
-- runners marking the same targets at once wait for each other, never deadlock.
UPDATE queueguard_fleet.targets t
SET state = 'done', revision = %(revision)s, finished_at = now(), elapsed_ms = 0
FROM (SELECT name FROM queueguard_fleet.targets
      WHERE run_id = %(run)s AND name = ANY(%(names)s::text[]) AND state = 'pending'
      ORDER BY name FOR UPDATE) mine
WHERE t.run_id = %(run)s AND t.name = mine.name AND t.state = 'pending'
RETURNING t.name;

-- name: skipped_unclaimed
UPDATE queueguard_fleet.targets
SET state = 'skipped', revision = %(revision)s, error = %(error)s, finished_at = now()
WHERE run_id = %(run)s AND name = %(name)s AND state = 'pending';

-- name: failures
SELECT count(*) FROM queueguard_fleet.targets
WHERE run_id = %(run)s AND wave = %(wave)s AND state = 'failed';

-- name: stop
-- The run claims nothing more; what was not claimed is skipped with the reason.
WITH stopped AS (
    UPDATE queueguard_fleet.runs SET stopped = %(reason)s
    WHERE id = %(run)s AND stopped IS NULL RETURNING id)
UPDATE queueguard_fleet.targets SET state = 'skipped', error = %(reason)s, finished_at = now()
WHERE run_id = %(run)s AND state = 'pending';

-- name: retry_failed
-- A rerun of an unfinished, unstopped run that no runner works (none alive within its
-- lease time): its failed targets are tried again. Run under the run's lock.
UPDATE queueguard_fleet.targets SET state = 'pending'
WHERE run_id = %(run)s AND state = 'failed'
  AND (SELECT stopped IS NULL AND finished_at IS NULL
              AND (active_until IS NULL OR active_until < now())
       FROM queueguard_fleet.runs WHERE id = %(run)s);

-- name: skip_stopped
-- In a stopped run, what will not be claimed again: pending targets (a target in flight
-- that stopped after its revision, once its runner recorded it) and running ones whose
-- lease expired (their runner was lost), skipped with the reason.
UPDATE queueguard_fleet.targets t
SET state = 'skipped', finished_at = now(), runner = NULL, lease_expires = NULL,
    error = coalesce(t.error || '; ', '') || r.stopped
FROM queueguard_fleet.runs r
WHERE r.id = %(run)s AND t.run_id = r.id AND r.stopped IS NOT NULL
  AND (t.state = 'pending' OR (t.state = 'running' AND t.lease_expires <= now()));

-- name: finish
-- The run ends once no target is pending or running.
UPDATE queueguard_fleet.runs SET finished_at = now()
WHERE id = %(run)s AND finished_at IS NULL AND NOT EXISTS (
    SELECT FROM queueguard_fleet.targets
    WHERE run_id = %(run)s AND state IN ('pending', 'running'));

-- name: live
-- Targets still pending or running (a runner with nothing to claim waits for these).
SELECT count(*) FILTER (WHERE state = 'pending'), count(*) FILTER (WHERE state = 'running'),
       (SELECT finished_at IS NOT NULL FROM queueguard_fleet.runs WHERE id = %(run)s),
       (SELECT stopped FROM queueguard_fleet.runs WHERE id = %(run)s)
FROM queueguard_fleet.targets WHERE run_id = %(run)s;

-- name: board
SELECT t.name, t.wave, w.name, t.state, t.revision, t.error, t.attempts, t.elapsed_ms,
       t.predicted_ms, t.fence, t.dsn, t.schema,
       CASE WHEN t.state = 'running'
            THEN (extract(epoch FROM now() - t.started_at) * 1000)::bigint END,
       t.state = 'running' AND t.lease_expires <= now(), t.lock_waits
FROM queueguard_fleet.targets t
LEFT JOIN queueguard_fleet.waves w ON w.run_id = t.run_id AND w.position = t.wave
WHERE t.run_id = %(run)s
ORDER BY t.wave NULLS LAST, t.position;
