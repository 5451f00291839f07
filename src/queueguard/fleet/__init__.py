"""`queueguard fleet`: one migration set across many targets.

A *fleet* is the set of targets one migration set is applied to together: databases (a
database per tenant, shards, regions) and schemas in a database (a schema per tenant), as a
targets file lists them or a server's catalog reveals them. (Texts about the runtime's v0.4
workers call those *hosts*; a fleet is never a set of hosts.)

Modules: `targets` (the file, checked), `discover`, `waves`, `control` (the control
database: runs, leases, fences), `apply` (one target, as `upgrade` does it), `run` (one
runner's workers, heartbeat and signals), `upgrade` (the run from the file), `board`,
`events` (lines, JSON events, Prometheus metrics), `verify`, `matrix`. This package sits
above `queueguard.queue_schema`: it calls the runners, it adds nothing to them but the runner
lock's key per target and a hook on the connections they open."""
