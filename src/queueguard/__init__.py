"""queueguard: a fenced task-queue runtime on PostgreSQL and the framework that upgrades it."""

__version__ = "0.4.0"

#: The runtime protocol this code speaks; 004 sets runtime_protocol to [4, 4].
PROTOCOL = 4
