-- Bounded waits: without them a lock request that queues behind a long transaction makes
-- every later query on account queue behind it too.
SET lock_timeout = '2s';
SET statement_timeout = '60s';
ALTER TABLE account ADD COLUMN email text;
