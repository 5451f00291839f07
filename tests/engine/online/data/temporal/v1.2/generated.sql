ALTER TABLE visits
  ADD COLUMN task_queue VARCHAR(255) GENERATED ALWAYS AS (search_attributes->>'TaskQueue') STORED,
  ADD COLUMN build_ids JSONB GENERATED ALWAYS AS (search_attributes->'BuildIds') STORED;
CREATE INDEX by_task_queue ON visits (namespace_id, task_queue, start_time DESC, run_id);
