-- Step 4: the fence. Every v0.3 owner's next range-checked write fails, and every v0.3
-- handshake refuses protocol 3 against [4, 4].
UPDATE task_queues SET range_id = range_id + 1;
UPDATE runtime_protocol SET min_protocol = 4, max_protocol = 4;
