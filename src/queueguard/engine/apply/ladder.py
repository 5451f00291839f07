"""The lock-timeout ladder every runner climbs (GitLab's with_lock_retries): an attempt that
hits its lock_timeout is rolled back and tried again after a jittered pause, with a longer
timeout, a bounded number of times; then the upgrade gives up with nothing of the attempt
kept. `climb` is the one loop that does it in-process; the Django runner, which runs in the
project's interpreter, is handed the same schedule (`schedule`).

Kept free of Alembic and SQLAlchemy (a second of imports a Django project's command would
otherwise pay)."""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from typing import TypeVar

import psycopg

from queueguard.errors import LockTimeout

#: how long a runner waits for the runner lock another run holds
RUNNER_WAIT_S = 30.0
#: each retry waits a jittered RETRY_SLEEP_S × its number, then tries again with a
#: lock_timeout RETRY_GROWTH times the last (`ladder_s` bounds the whole climb)
RETRY_GROWTH = 1.5
RETRY_SLEEP_S = (0.1, 0.5)

T = TypeVar("T")


def schedule(lock_timeout_ms: int, retries: int) -> dict[str, object]:
    """The ladder for a runner in another process (Django's, in the project's interpreter):
    the lock_timeouts of the retries after the first attempt, and the pause before each
    (its mean; pure)."""
    timeouts, timeout = [], float(lock_timeout_ms)
    for _ in range(retries):
        timeout *= RETRY_GROWTH
        timeouts.append(int(timeout))
    return {"timeouts": timeouts, "pause_s": sum(RETRY_SLEEP_S) / 2}


def ladder_s(lock_timeout_ms: int, retries: int) -> float:
    """The longest a runner can wait for one revision's locks before it gives up: every
    attempt's lock_timeout and every pause between them (pure)."""
    waits = sum(lock_timeout_ms * RETRY_GROWTH**k for k in range(retries + 1)) / 1000
    sleeps = sum(RETRY_SLEEP_S[1] * (k + 1) for k in range(retries))
    return waits + sleeps


def ladder_pause(tries: int) -> float:
    """The pause before retry number `tries`: jittered, longer each time."""
    return random.uniform(*RETRY_SLEEP_S) * tries


def gave_up(what: str, retries: int, timeout: int, kept: str) -> LockTimeout:
    """The one wording of a ladder climbed to its top: what waited, how many attempts, the
    last lock_timeout, and what of it stays (`kept`)."""
    return LockTimeout(
        f"{what}: could not get its locks after {retries + 1} attempts (last lock_timeout "
        f"{timeout} ms); {kept}"
    )


def lock_not_available(exc: BaseException) -> object | None:
    """A lock timeout (SQLSTATE 55P03) as psycopg raises it: one thing waited."""
    return "" if isinstance(exc, psycopg.errors.LockNotAvailable) else None


def climb(
    attempt: Callable[[int], T],
    lock_timeout_ms: int,
    retries: int,
    *,
    give_up: Callable[[int, Exception], Exception],
    waited: Callable[[Exception], None] | None = None,
    lock_wait: Callable[[Exception], object | None] = lock_not_available,
    growth: float = RETRY_GROWTH,
    pause: Callable[[int], float] = ladder_pause,
) -> T:
    """`attempt(lock_timeout_ms)` until it returns. An exception `lock_wait` names (what
    waited: a revision, or "") is a lock wait: `waited(exc)` cleans up (rolls back, counts),
    then after the pause the next attempt gets the next rung; once `retries` retries have
    waited, `give_up(last timeout, exc)` is raised instead. A wait of another thing than the
    last one (a run started over got further, to its next revision) starts a ladder of its
    own. Any other exception propagates. `growth` and `pause` shape another schedule (the
    own set's online rollout keeps its lock_timeout fixed, beside live hosts)."""
    timeout, tries, last = lock_timeout_ms, 0, None
    while True:
        try:
            return attempt(timeout)
        except Exception as exc:
            who = lock_wait(exc)
            if who is None:
                raise
            if who != last:
                timeout, tries, last = lock_timeout_ms, 0, who
            if waited is not None:
                waited(exc)
            if tries == retries:
                raise give_up(timeout, exc) from None
            tries += 1
            time.sleep(pause(tries))
            timeout = int(timeout * growth)
