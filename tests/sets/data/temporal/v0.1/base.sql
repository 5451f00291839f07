-- The first version: two tables.
CREATE TABLE kennels (
  kennel_id BIGINT NOT NULL,
  name VARCHAR(64) NOT NULL,
  PRIMARY KEY (kennel_id)
);

CREATE TABLE dogs (
  kennel_id BIGINT NOT NULL,
  dog_id BIGINT NOT NULL,
  name VARCHAR(64) NOT NULL, -- the call name, not the pedigree one
  PRIMARY KEY (kennel_id, dog_id)
);
