-- expect: audit.not_read_only
-- A plain UPDATE.
UPDATE task_queues SET ack_level = 0 WHERE false;
