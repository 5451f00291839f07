-- expect: audit.not_read_only
-- sqlglot cannot parse ORDER BY … USING: unknown syntax is not provably read-only.
SELECT task_id FROM tasks ORDER BY task_id USING <;
