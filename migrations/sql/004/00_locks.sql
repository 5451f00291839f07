-- 004 (v0.4, head): version directives, relocation of legacy auto backlogs, the fence.
-- Lock order (documented in docs/migrations.md, checked by `queueguard lint`): parents before
-- children — task_queues, then tasks, then runtime_protocol. executions is only read
-- (ACCESS SHARE), so History keeps running. The guard (audit_queries/ checks for revision
-- 003) runs after these locks are held, so nothing can change between check and rewrite.
-- Timeouts: steps.apply runs SET LOCAL lock_timeout and statement_timeout before step 00.
-- lint-allow squawk.require-lock-timeout: set by steps.apply (SET LOCAL) before step 00
-- lint-allow squawk.require-statement-timeout: set by steps.apply (SET LOCAL) before step 00
LOCK TABLE task_queues IN ACCESS EXCLUSIVE MODE;
LOCK TABLE tasks IN ACCESS EXCLUSIVE MODE;
LOCK TABLE runtime_protocol IN ACCESS EXCLUSIVE MODE;
