-- Is this server a hot standby, how far behind is it, and which primary does it stream from.

-- name: standby
-- One row: in recovery?, the primary's conninfo (pg_stat_wal_receiver; NULL unless the role
-- may see it), replay lag in seconds (0 when everything received is replayed) and in bytes.
SELECT pg_is_in_recovery(),
       (SELECT conninfo FROM pg_stat_wal_receiver LIMIT 1),
       CASE WHEN NOT pg_is_in_recovery() THEN NULL
            WHEN pg_last_wal_receive_lsn() IS NOT DISTINCT FROM pg_last_wal_replay_lsn() THEN 0
            ELSE extract(epoch FROM now() - pg_last_xact_replay_timestamp())
       END::float8,
       CASE WHEN pg_is_in_recovery()
            THEN pg_wal_lsn_diff(pg_last_wal_receive_lsn(), pg_last_wal_replay_lsn())
       END::bigint;

-- name: server_port
-- The port the server listens on (a client on another port talks to a pooler or proxy).
SELECT current_setting('port');


-- name: replica_positions
-- On a primary: where its WAL is, where its slowest streaming standby's replay is (bytes),
-- the largest replay lag the standbys report, how many stream, how old the slowest one's
-- last report is (seconds), and the WAL that inactive replication slots hold back (a
-- disconnected standby keeping a slot), with their names. Standbys only: a logical
-- walsender (a subscription, a CDC consumer) replays nothing and is left out.
WITH standby AS (
    SELECT * FROM pg_stat_replication r
    WHERE NOT EXISTS (SELECT 1 FROM pg_replication_slots s
                      WHERE s.active_pid = r.pid AND s.slot_type = 'logical')
)
SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::float8,
       (SELECT pg_wal_lsn_diff(min(replay_lsn), '0/0') FROM standby)::float8,
       (SELECT coalesce(max(extract(epoch FROM replay_lag)), 0) FROM standby)::float8,
       (SELECT count(*) FROM standby),
       (SELECT coalesce(max(extract(epoch FROM clock_timestamp() - reply_time)), 0)
        FROM standby)::float8,
       (SELECT coalesce(sum(pg_wal_lsn_diff(pg_current_wal_lsn(), restart_lsn)), 0)
        FROM pg_replication_slots WHERE NOT active AND restart_lsn IS NOT NULL)::float8,
       (SELECT string_agg(slot_name, ', ' ORDER BY slot_name) FROM pg_replication_slots
        WHERE NOT active AND restart_lsn IS NOT NULL);
