-- Parents before children, every lock up front.
SET lock_timeout = '5s';
SET statement_timeout = '60s';
LOCK TABLE task_queues IN ACCESS EXCLUSIVE MODE;
LOCK TABLE tasks IN ACCESS EXCLUSIVE MODE;
LOCK TABLE runtime_protocol;
-- Already held: no new acquisition, whatever the order from here on.
LOCK TABLE task_queues IN ACCESS EXCLUSIVE MODE;
-- Weaker modes and unrelated tables are not ordered.
LOCK TABLE executions IN SHARE MODE;
