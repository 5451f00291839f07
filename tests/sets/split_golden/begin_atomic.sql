CREATE FUNCTION task_count(q text) RETURNS bigint
LANGUAGE sql
BEGIN ATOMIC
    SELECT count(*) FROM tasks WHERE queue = q;
END;

CREATE OR REPLACE PROCEDURE archive_done(cutoff timestamptz)
LANGUAGE sql
BEGIN ATOMIC
    INSERT INTO tasks_archive SELECT * FROM tasks WHERE done_at < cutoff;
    DELETE FROM tasks WHERE done_at < cutoff;
    UPDATE stats SET archived = CASE WHEN archived IS NULL THEN 1 ELSE archived + 1 END;
END;

create function lower_name(n text) returns text language sql begin atomic select lower(n); end;
SELECT task_count('default');
