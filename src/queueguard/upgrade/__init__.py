"""The schema migration and upgrade-verification framework: the runner and its steps, the
manifest, the shared audit checks (preflight and the migration guard), verify, rehearse,
the golden fixtures, released (legacy) workers and the compatibility matrix."""
