DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'worker') THEN
        CREATE ROLE worker;
    END IF;
END
$$;

DO LANGUAGE plpgsql $do$
DECLARE
    n int;
BEGIN
    SELECT count(*) INTO n FROM tasks;
    RAISE NOTICE 'tasks: %; done', n;
END
$do$;
