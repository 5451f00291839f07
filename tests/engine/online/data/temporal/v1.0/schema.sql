CREATE TABLE namespaces (id CHAR(64) NOT NULL PRIMARY KEY, name TEXT NOT NULL);
CREATE TABLE visits (
  namespace_id CHAR(64) NOT NULL,
  run_id CHAR(64) NOT NULL,
  start_time TIMESTAMP NOT NULL,
  status INTEGER NOT NULL,
  search_attributes JSONB,
  memo BYTEA,
  PRIMARY KEY (namespace_id, run_id)
);
CREATE INDEX by_start_time ON visits (namespace_id, start_time DESC, run_id);
