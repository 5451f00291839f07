"""The engine that upgrades any migration set — queueguard's own, Temporal's schema, Alembic
and Django projects, plain SQL folders — read into one model by `queueguard.sets`.

`plan` prices a set's pending statements on a scratch copy; `apply` runs them with bounded
locks, the runner lock, the retry ladder and the format's own bookkeeping; `online` runs the
statements over the lock budget in online forms (`online.rebuild`: the shadow-table
rebuild); `verify` proves the chain and the fixtures; `rehearse` runs the upgrade on a copy.
`formats` holds what one format adds to the engine (Alembic's env.py, Django's migrate).
The modules at this level are the PostgreSQL facts they share: catalogs, checksums, dumps,
lock budgets and the server's topology."""
