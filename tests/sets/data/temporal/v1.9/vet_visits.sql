CREATE TABLE vet_visits (
  kennel_id BIGINT NOT NULL,
  dog_id BIGINT NOT NULL,
  visit_id BIGINT NOT NULL,
  notes TEXT,
  PRIMARY KEY (kennel_id, dog_id, visit_id)
);
