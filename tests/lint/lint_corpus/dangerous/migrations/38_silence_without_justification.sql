-- expect: lint.silence_invalid, squawk.require-lock-timeout
-- A marker that does not say why silences nothing.
-- lint-allow squawk.require-lock-timeout
SET statement_timeout = '60s';
LOCK TABLE task_queues IN ACCESS EXCLUSIVE MODE;
