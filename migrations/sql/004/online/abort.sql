-- 004 online, abort (before contract closed the window): back to [3, 3]. What migrate did
-- stays, and stays valid for v0.3 hosts: a directive is one more key in a payload they pass
-- through; relocated rows are ordinary rows of default queues they serve; a drained @auto
-- queue is an empty queue they may load again. A later upgrade (offline or online) finishes
-- the job from there.

-- name: reopen_v03
-- Under ACCESS EXCLUSIVE on runtime_protocol (rollout.sql lock_protocol, taken first).
UPDATE runtime_protocol SET min_protocol = 3, max_protocol = 3;

-- name: fence_protocol4
-- Every queue a protocol-4 host holds: its next range-checked write fails, and its next load
-- is refused by the handshake ([3, 3]).
UPDATE task_queues SET range_id = range_id + 1, protocol4_range = NULL
WHERE protocol4_range = range_id;
