-- A Django project's bookkeeping, read as its recorder reads it (only Django writes it).

-- name: has_table
SELECT to_regclass('django_migrations') IS NOT NULL;

-- name: applied
SELECT app || '.' || name FROM django_migrations;
