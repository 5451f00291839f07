COMMENT ON TABLE tasks IS $$A task; 'quotes' and "quotes" are text here$$;
SELECT $outer$ keeps $inner$ a ; b $inner$ and $$ ; $$ inside $outer$ AS nested;
PREPARE claim (bigint, text) AS
    UPDATE tasks SET owner = $2 WHERE id = $1 RETURNING id;
SELECT price$usd, a$b$ FROM prices;
PREPARE label (text) AS SELECT $1||$$; suffix$$;
