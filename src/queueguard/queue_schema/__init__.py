"""queueguard's own migration set (001–004) and the gates around its upgrade: the runner's
guards and its steps, the manifest, the shared audit checks (preflight and the migration
guard), the golden fixtures and their generator, verify, rehearse, snapshots, released
(legacy) workers with the protocol fence, the compatibility matrix, and the online
003 → 004 path with live hosts."""
