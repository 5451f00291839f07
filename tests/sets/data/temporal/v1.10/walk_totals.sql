ALTER TABLE dogs ADD COLUMN walked_minutes BIGINT NOT NULL DEFAULT 0;

DO $$
BEGIN
  UPDATE dogs d SET walked_minutes = w.total
  FROM (SELECT kennel_id, dog_id, sum(minutes) AS total FROM walks GROUP BY 1, 2) w
  WHERE d.kennel_id = w.kennel_id AND d.dog_id = w.dog_id;
END;
$$;
