"""The runner's waiting constants, in a module of their own: every runner (queueguard's own,
and the other formats', Django's among them) reads them without importing Alembic and
SQLAlchemy, which `upgrade.runner` needs (a second of imports a command of a Django project
would otherwise pay)."""

#: how long a runner waits for the runner lock another run holds
RUNNER_WAIT_S = 30.0
#: the lock-timeout ladder: each retry waits a jittered RETRY_SLEEP_S × its number, then
#: tries again with a lock_timeout RETRY_GROWTH times the last (`runner.ladder_s` bounds it)
RETRY_GROWTH = 1.5
RETRY_SLEEP_S = (0.1, 0.5)
