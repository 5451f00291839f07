-- expect: audit.not_read_only
-- A sequence advances even in a rolled-back transaction.
SELECT nextval('tasks_delivery_id_seq');
