"""The two implementations of the store contract (memory and PostgreSQL) and the PostgreSQL
start-up rule. Nothing here imports the upgrade framework: creating the head schema in an
empty database goes through an installer the caller (or the top-level package) provides."""
