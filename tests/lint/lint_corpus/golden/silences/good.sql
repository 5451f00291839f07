-- A justified, used marker: the finding is silenced and reported as such.
-- lint-allow squawk.require-lock-timeout, squawk.require-statement-timeout: set by the runner
LOCK TABLE task_queues IN ACCESS EXCLUSIVE MODE;
