-- balance outgrew int: a type change rewrites the table under ACCESS EXCLUSIVE
ALTER TABLE account ALTER COLUMN balance TYPE bigint;
