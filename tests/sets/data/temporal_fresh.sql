-- The test Temporal set's fresh install at 1.10, as Temporal ships `schema.sql` beside
-- `versioned/`: what `setup-schema --schema-file` runs on an empty database. `born` sits
-- where a person writing the schema by hand put it, not after `name` where 0.2's ALTER
-- TABLE left it: a column order verify reports as a note, not a difference.
CREATE TABLE kennels (
  kennel_id BIGINT NOT NULL,
  name VARCHAR(64) NOT NULL,
  PRIMARY KEY (kennel_id)
);

CREATE TABLE dogs (
  kennel_id BIGINT NOT NULL,
  dog_id BIGINT NOT NULL,
  born DATE,
  name VARCHAR(64) NOT NULL,
  walked_minutes BIGINT NOT NULL DEFAULT 0,
  PRIMARY KEY (kennel_id, dog_id)
);

CREATE TABLE walks (
  kennel_id BIGINT NOT NULL,
  dog_id BIGINT NOT NULL,
  started_at TIMESTAMP NOT NULL,
  minutes INTEGER NOT NULL DEFAULT 0,
  PRIMARY KEY (kennel_id, dog_id, started_at)
);

CREATE INDEX walks_started_at_idx ON walks (started_at);

CREATE TABLE vet_visits (
  kennel_id BIGINT NOT NULL,
  dog_id BIGINT NOT NULL,
  visit_id BIGINT NOT NULL,
  notes TEXT,
  PRIMARY KEY (kennel_id, dog_id, visit_id)
);
