-- 003 (v0.3): queue ownership. Released; frozen history.
-- Lock order: tasks, the only pre-existing table this revision touches. The guard
-- (audit_queries/ checks for revision 002) runs after this lock is held.
LOCK TABLE tasks IN ACCESS EXCLUSIVE MODE;
