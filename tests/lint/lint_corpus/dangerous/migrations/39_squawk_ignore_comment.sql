-- expect: lint.silence_invalid, squawk.require-lock-timeout
-- squawk's own ignore comment carries no justification: the gate defuses it and reports both.
SET statement_timeout = '60s';
-- squawk-ignore require-lock-timeout
LOCK TABLE task_queues IN ACCESS EXCLUSIVE MODE;
