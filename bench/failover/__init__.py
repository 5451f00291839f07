"""Chaos scenario 12 (docs/reliability.md): the leader fails over during an upgrade.

`python -m bench.failover` runs `scenario`: its input, kill points and rounds (`model`),
the runtime traffic through PgBouncer (`traffic`) and the report (`report`), on the
Patroni cluster of `bench.topology.patroni`."""
