CREATE INDEX walks_started_at_idx ON walks (started_at);
ALTER TABLE dogs ADD COLUMN born DATE;
