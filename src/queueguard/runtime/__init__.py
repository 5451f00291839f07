"""The task-queue runtime (a compact model of Temporal's Matching service): the partition
manager, one backlog manager per loaded physical queue, static membership. It talks to
storage only through the `Store` contract of `queueguard.core.store`."""
