-- expect: squawk.require-lock-timeout, squawk.require-statement-timeout
-- Unbounded lock waits: the queued ACCESS EXCLUSIVE request blocks all runtime traffic.
-- (queueguard revisions silence these per file: the runner sets both with SET LOCAL.)
LOCK TABLE task_queues IN ACCESS EXCLUSIVE MODE;
