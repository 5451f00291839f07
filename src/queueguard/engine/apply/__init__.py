"""Applying a migration set with the runner's guarantees: `runner` applies (one transaction
per revision, the format's bookkeeping), `session` (limits, the runner lock, a lost server),
`ladder` (the lock-timeout retry schedule), `progress` and `outside` (statements that must
run outside a transaction, resumably), `half_applied` (a version another tool stopped in the
middle of is refused), `report` (what ran)."""
