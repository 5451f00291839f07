"""Real production parts started by the tests and benchmarks themselves, from the machine's
packages (Debian's `pgbouncer`): never runtime dependencies of queueguard."""
