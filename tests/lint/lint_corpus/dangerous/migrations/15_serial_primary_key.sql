-- expect: squawk.adding-serial-primary-key-field, squawk.prefer-identity
-- A serial primary key rewrites the table and builds its index under lock.
SET lock_timeout = '5s';
SET statement_timeout = '60s';
ALTER TABLE tasks ADD COLUMN id bigserial PRIMARY KEY;
