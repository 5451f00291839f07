-- expect: squawk.ban-drop-database
-- Never in a migration.
SET lock_timeout = '5s';
SET statement_timeout = '60s';
DROP DATABASE queueguard;
