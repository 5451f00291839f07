-- A versioned schema file in the style of the sets queueguard reads: tables, an index, seed
-- rows, and a last statement without its semicolon.
CREATE TABLE queue_partitions (
  queue_name VARCHAR(255) NOT NULL,
  partition_no INTEGER NOT NULL,
  range_id BIGINT NOT NULL DEFAULT 0,
  --
  payload BYTEA NOT NULL,
  payload_encoding VARCHAR(16) NOT NULL DEFAULT 'proto3',
  PRIMARY KEY (queue_name, partition_no)
);

CREATE INDEX queue_partitions_range ON queue_partitions (range_id);

INSERT INTO queue_partitions (queue_name, partition_no, payload) VALUES ('default', 0, '\x00');
ALTER TABLE queue_partitions ADD COLUMN IF NOT EXISTS paused BOOLEAN NOT NULL DEFAULT false
