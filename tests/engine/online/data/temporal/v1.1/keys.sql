CREATE INDEX by_status ON visits (namespace_id, status, start_time DESC, run_id);
ALTER TABLE visits ADD CONSTRAINT fk_namespace FOREIGN KEY (namespace_id) REFERENCES namespaces (id);
