-- expect: squawk.adding-foreign-key-constraint, squawk.constraint-missing-not-valid
-- A foreign key validated at once locks and scans both tables.
SET lock_timeout = '5s';
SET statement_timeout = '60s';
ALTER TABLE tasks ADD CONSTRAINT tasks_queue_fk
    FOREIGN KEY (physical_queue) REFERENCES task_queues (physical_queue);
