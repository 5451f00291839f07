-- expect: migration.lock_order
-- ALTER TABLE takes ACCESS EXCLUSIVE implicitly: child first, then parent.
SET lock_timeout = '5s';
SET statement_timeout = '60s';
ALTER TABLE tasks SET (autovacuum_vacuum_scale_factor = 0.01);
ALTER TABLE task_queues ADD COLUMN note text;
