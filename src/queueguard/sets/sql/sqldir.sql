-- The ledger of a plain SQL directory: one row per applied file, with its checksum.

-- name: ledger_exists
SELECT to_regclass('queueguard_sqldir_ledger') IS NOT NULL;

-- name: applied
SELECT revision, checksum, applied_at FROM queueguard_sqldir_ledger;

-- name: create_ledger
CREATE TABLE IF NOT EXISTS queueguard_sqldir_ledger (
    revision text PRIMARY KEY,
    checksum text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
);

-- name: record
INSERT INTO queueguard_sqldir_ledger (revision, checksum) VALUES (%(revision)s, %(checksum)s);
