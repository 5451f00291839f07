-- expect: audit.not_read_only
-- INSERT in a CTE.
WITH i AS (INSERT INTO runtime_protocol VALUES (4, 4) RETURNING 1)
SELECT * FROM i;
