"""verify's `refusals` check: the databases an upgrade must refuse, handed to it.

Each negative case (`fixtures/negative/*.sql`) patches a copy of the golden v0.3 database
with one defect. `upgrade` — and, for a revision with an online path, `upgrade --online`'s
expand — must refuse it with a typed error (one that names the finding's code where the guard
refuses) and leave every table, relation and constraint as it was. A guard switched off, or a
revision that runs before the guard has looked, fails here: no golden fixture is broken.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from queueguard.engine.checksums import fingerprint
from queueguard.errors import QueueguardError
from queueguard.pg.connect import connection
from queueguard.queue_schema import online
from queueguard.queue_schema.golden import NegativeCase
from queueguard.queue_schema.runner import upgrade
from queueguard.revisions import SetFacts

#: the online attempt's knobs: never wait for anything (a refusal is immediate)
KNOBS = online.Knobs(batch_size=2, max_lag_s=None, wait_s=0, retries=0)


@dataclass(frozen=True)
class Attempt:
    """One upgrade path handed one broken database."""

    path: str  # "upgrade" or "upgrade --online"
    refused: str | None  # the error's type and first line; None: it ran
    names_code: bool  # the refusal names the case's finding code
    unchanged: bool


def _fingerprint(dsn: str) -> dict[str, str]:
    with connection(dsn) as conn:
        return fingerprint(conn)


def attempt(dsn: str, path: str, run: Callable[[str], object], case: NegativeCase) -> Attempt:
    before = _fingerprint(dsn)
    refused: str | None = None
    message = ""
    try:
        run(dsn)
    except QueueguardError as exc:
        message = str(exc)
        first = (message.strip().splitlines() or [""])[0]
        refused = f"{type(exc).__name__}: {first}"
    return Attempt(path, refused, case.expect in message, _fingerprint(dsn) == before)


def problems(case: NegativeCase, attempts: list[Attempt]) -> list[str]:
    """What is wrong with the attempts on one case (pure)."""
    found = []
    for a in attempts:
        where = f"{case.name} ({case.expect}) {a.path}"
        if a.refused is None:
            found.append(f"{where}: not refused, the broken database was migrated")
        elif case.guarded and not a.names_code:
            found.append(f"{where}: refused without naming {case.expect}: {a.refused}")
        if not a.unchanged:
            found.append(f"{where}: the database changed")
    return found


def run_case(dsn: str, case: NegativeCase, migrations: SetFacts, online_path: bool) -> list[str]:
    """Patch `dsn` (a copy of the base fixture) with the case, then hand it to each path."""
    with connection(dsn) as conn:
        conn.execute(case.sql)  # no parameters: `%` in the patch is left alone
        conn.commit()
    attempts = [
        attempt(
            dsn,
            "upgrade",
            lambda d: upgrade(d, progress=False, retries=0, migrations=migrations),
            case,
        )
    ]
    if online_path and attempts[0].refused is not None and attempts[0].unchanged:
        attempts.append(
            attempt(
                dsn,
                "upgrade --online",
                lambda d: online.run(d, phase="expand", knobs=KNOBS, migrations=migrations),
                case,
            )
        )
    return problems(case, attempts)
