"""How each step of `queueguard preflight` runs bounded: the limits every statement runs
under, and one step (an audit file, a catalog read) in a savepoint whose lock timeout,
statement timeout or error rolls back to it and becomes a blocking finding, so that one
failing check neither hangs nor ends the audit and the others still run. Apart from
`queue_schema.preflight`, which decides what to check, because this is the one place that
decides what a check that could not finish reports.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

import psycopg
from psycopg.rows import TupleRow

from queueguard.errors import UsageError
from queueguard.pg.sqlfiles import queries
from queueguard.queue_schema import audit
from queueguard.queue_schema.audit import Finding

MAX_SAMPLES = 1000
#: PostgreSQL's timeouts are int milliseconds; the idle timeout is lock + statement timeout.
MAX_TIMEOUT_MS = 2**31 - 1
_SAVEPOINT = "queueguard_check"

Q = queries("queueguard.queue_schema", "preflight.sql")
Cursor = psycopg.Cursor[TupleRow]
T = TypeVar("T")


@dataclass(frozen=True)
class Limits:
    """The bounds every statement of one preflight runs under."""

    lock_timeout_ms: int = 5000
    statement_timeout_ms: int = 60000
    samples: int = 10

    def validate(self) -> Limits:
        if self.lock_timeout_ms <= 0 or self.statement_timeout_ms <= 0:
            raise UsageError("preflight needs positive lock and statement timeouts (0 = none)")
        if self.lock_timeout_ms + self.statement_timeout_ms > MAX_TIMEOUT_MS:  # idle timeout
            raise UsageError(
                f"lock and statement timeouts together may not exceed {MAX_TIMEOUT_MS} ms"
            )
        if not 0 <= self.samples <= MAX_SAMPLES:
            raise UsageError(f"--samples takes 0…{MAX_SAMPLES}, got {self.samples}")
        return self


def check(cur: Cursor, query: audit.AuditQuery, limits: Limits) -> list[Finding]:
    """Run one audit file in a savepoint; timeouts and errors become blocking findings."""
    found, failure = guarded(cur, query.name, limits, lambda: _shaped(audit.run(cur, query)))
    if failure is not None or found is None:
        return [failure] if failure is not None else []
    return [_bounded(f, limits.samples) for f in found]


def _shaped(findings: list[Finding]) -> list[Finding]:
    """Reject rows that are not (dotted code, known severity, object, count, samples)."""
    for f in findings:
        if not (isinstance(f.code, str) and "." in f.code and f.severity in audit.SEVERITIES):
            raise ValueError(f"unexpected row {f.code!r}, {f.severity!r}")
    return findings


def _bounded(finding: Finding, samples: int) -> Finding:
    if len(finding.samples) <= samples:
        return finding
    return Finding(
        finding.code,
        finding.severity,
        finding.object,
        finding.count,
        finding.samples[:samples],
        finding.message,
    )


def guarded(
    cur: Cursor, name: str, limits: Limits, step: Callable[[], T]
) -> tuple[T | None, Finding | None]:
    """Run `step` in a savepoint; a timeout or error rolls back to it and becomes a finding."""
    cur.execute(f"SAVEPOINT {_SAVEPOINT}")
    try:
        result = step()
    except psycopg.errors.LockNotAvailable:
        _rollback_to_savepoint(cur)
        return None, _lock_timeout(cur, name, limits)
    except psycopg.errors.QueryCanceled:
        _rollback_to_savepoint(cur)
        return None, _statement_timeout(name, limits)
    except psycopg.Error as exc:
        if cur.connection.broken:
            raise
        _rollback_to_savepoint(cur)
        return None, _failed(name, exc.sqlstate or "", _first_line(str(exc)))
    except (ValueError, TypeError) as exc:  # rows not shaped (code, severity, object, …)
        _rollback_to_savepoint(cur)
        return None, _failed(name, "", f"unexpected row shape: {exc}")
    cur.execute(f"RELEASE SAVEPOINT {_SAVEPOINT}")
    return result, None


def _rollback_to_savepoint(cur: Cursor) -> None:
    cur.execute(f"ROLLBACK TO SAVEPOINT {_SAVEPOINT}")


def _lock_timeout(cur: Cursor, name: str, limits: Limits) -> Finding:
    """Name who holds ACCESS EXCLUSIVE (the only mode that conflicts with ACCESS SHARE)."""
    holders = [
        {"check": name, "relation": rel, "pid": pid, "applicationName": app, "mode": mode}
        for rel, pid, app, mode in cur.execute(Q["exclusive_holders"]).fetchall()
    ][: max(limits.samples, 1)]
    relations = sorted({str(h["relation"]) for h in holders})
    where = ", ".join(relations) or "a table it reads"
    return Finding(
        "locks.lock_timeout",
        "blocking",
        ", ".join(relations) or name,
        max(len(relations), 1),
        holders or [{"check": name}],
        f"{name} could not get ACCESS SHARE on {where} within lock_timeout "
        f"{limits.lock_timeout_ms} ms: another session holds a conflicting lock, and the "
        "migration would wait for it too. Retry once it is released.",
    )


def _statement_timeout(name: str, limits: Limits) -> Finding:
    return Finding(
        "locks.statement_timeout",
        "blocking",
        name,
        1,
        [{"check": name, "statementTimeoutMs": limits.statement_timeout_ms}],
        f"{name} did not finish within statement_timeout {limits.statement_timeout_ms} ms; "
        "it was cancelled (nothing was changed). Raise --statement-timeout, or run the file "
        "by hand at a quiet time.",
    )


def _failed(name: str, sqlstate: str, error: str) -> Finding:
    return Finding(
        "preflight.query_failed",
        "blocking",
        name,
        1,
        [{"check": name, "sqlstate": sqlstate, "error": error}],
        f"{name} failed ({sqlstate or 'client'}: {error}); its precondition is unverified. "
        "The transaction is read-only, so nothing was changed.",
    )


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0] if text.strip() else ""
