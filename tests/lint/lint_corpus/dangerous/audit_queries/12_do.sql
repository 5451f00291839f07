-- expect: audit.not_read_only
-- DO runs arbitrary PL/pgSQL.
DO $$ BEGIN DELETE FROM tasks; END $$;
