-- Step 5: the ledger of applied revisions with their content hashes (001-004 are recorded
-- here at once by the runner; later revisions record themselves as they are applied).
CREATE TABLE queueguard_migrations (
    revision text PRIMARY KEY,
    sha256 text NOT NULL CHECK (sha256 ~ '^[0-9a-f]{64}$'),
    applied_at timestamptz NOT NULL DEFAULT now()
);
