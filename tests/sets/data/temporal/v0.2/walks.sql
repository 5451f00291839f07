CREATE TABLE walks (
  kennel_id BIGINT NOT NULL,
  dog_id BIGINT NOT NULL,
  started_at TIMESTAMP NOT NULL,
  minutes INTEGER NOT NULL DEFAULT 0,
  PRIMARY KEY (kennel_id, dog_id, started_at)
);
