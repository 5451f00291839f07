-- What the application's metadata.create_all() makes before its first `alembic upgrade`:
-- the tables its first revision alters (verify --base).
CREATE TABLE runs (id integer PRIMARY KEY, name text NOT NULL);
