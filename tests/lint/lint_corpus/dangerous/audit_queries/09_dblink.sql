-- expect: audit.not_read_only
-- dblink writes over another connection, outside READ ONLY.
SELECT * FROM dblink('dbname=queueguard', 'DELETE FROM tasks') AS t(ok text);
