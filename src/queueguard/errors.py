"""One error hierarchy for the whole product.

Every error carries the CLI exit code it maps to: 1 for refusals, findings and bad input
files, 2 for command-line usage errors and unreachable servers (docs/interfaces.md "Exit codes").
"""

from __future__ import annotations

from typing import Any


class QueueguardError(Exception):
    """Root of every error queueguard raises on purpose."""

    exit_code = 1


class UsageError(QueueguardError):
    """Bad command-line input: unknown option values, malformed durations or DSNs."""

    exit_code = 2


class UnknownRevisions(UsageError):
    """A database whose version rows name revisions the migration set does not hold: it
    cannot be placed in the set, so nothing is planned, applied or called up to date."""


class InvalidDsn(UsageError):
    """A connection string that cannot be parsed."""


class FleetFileError(UsageError):
    """A targets file (`queueguard fleet`) refused: one line naming its key."""


class SplitError(UsageError):
    """SQL text that cannot be split into statements: an unterminated quote, dollar-quote or
    block comment, or a psql meta-command (`\\set`), which a server does not understand."""

    exit_code = 1  # a bad input file, as docs/interfaces.md says

    def __init__(self, line: int, problem: str, source: str | None = None) -> None:
        self.line, self.problem, self.source = line, problem, source
        where = f"{source}:{line}" if source else f"line {line}"
        super().__init__(f"{where}: {problem}")


class ConnectionFailed(QueueguardError):
    """The database server could not be reached."""

    exit_code = 2


class EmbeddedServerError(QueueguardError):
    """The embedded PostgreSQL server could not be initialised, started or stopped."""

    exit_code = 2


class DataDirVersionMismatch(EmbeddedServerError):
    """The data directory belongs to another PostgreSQL major; it is never overwritten."""

    def __init__(self, data_dir: str, found: str, expected: str) -> None:
        self.data_dir, self.found, self.expected = data_dir, found, expected
        super().__init__(
            f"data directory {data_dir} was made by PostgreSQL {found}, but the embedded "
            f"server is PostgreSQL {expected}; it is left untouched. Move it away or set "
            f"QUEUEGUARD_HOME to another folder."
        )


class InvalidQueueKey(QueueguardError):
    """A physical queue key or one of its components is not valid."""


class StaleRangeError(QueueguardError):
    """A queue owner's range is older than the stored one: another host took the queue over."""

    def __init__(self, queue: str, held: int, current: int | None) -> None:
        self.queue, self.held, self.current = queue, held, current
        super().__init__(
            f"queue {queue}: held range {held} is stale (current range {current}); "
            "another owner took it over, the manager unloads"
        )


class QueueUnloaded(QueueguardError):
    """An operation was attempted on a backlog manager that is no longer loaded."""


class UserDataConflict(QueueguardError):
    """A user-data compare-and-swap lost: the stored version is not the expected one."""

    def __init__(self, namespace: str, task_queue: str, expected: int, actual: int) -> None:
        self.namespace, self.task_queue = namespace, task_queue
        self.expected, self.actual = expected, actual
        super().__init__(
            f"user data {namespace}/{task_queue}: expected version {expected}, found {actual}"
        )


class ProtocolMismatch(QueueguardError):
    """The schema's runtime_protocol range does not include this worker's protocol."""

    def __init__(self, worker: int, schema_min: int | None, schema_max: int | None) -> None:
        self.worker, self.schema_min, self.schema_max = worker, schema_min, schema_max
        if schema_min is None or schema_max is None:
            remedy = (
                "the runtime_protocol table is missing or does not hold exactly one row "
                "(inspect with queueguard status and queueguard preflight)"
            )
        elif worker < schema_min:
            remedy = "upgrade this worker (the schema is newer)"
        else:
            remedy = "run queueguard upgrade (the schema is older)"
        super().__init__(
            f"protocol mismatch: worker speaks protocol {worker}, schema accepts "
            f"[{schema_min}, {schema_max}]: {remedy}"
        )


class SchemaTooOld(QueueguardError):
    """The database holds an older released schema; the runtime never upgrades implicitly."""

    def __init__(self, revision: str | None) -> None:
        self.revision = revision
        super().__init__(
            f"database schema is at revision {revision or 'unknown'}, older than this code: "
            "run queueguard upgrade"
        )


class UnknownSchema(QueueguardError):
    """The database holds tables that are not a queueguard schema we know."""


class SnapshotError(QueueguardError):
    """A memory snapshot that cannot be imported; nothing was imported."""

    def __init__(self, message: str, record: str | None = None) -> None:
        self.record = record
        super().__init__(f"{record}: {message}" if record else message)


class LegacySnapshotError(SnapshotError):
    """A pre-003 export (deliveryId based): not an import format for the current schema."""


class MigrationError(QueueguardError):
    """A migration could not be applied; the database is left as it was."""

    #: the SQLSTATE of the statement that failed, where a statement did
    sqlstate: str | None = None


class MigrationRefused(MigrationError):
    """A migration's precondition failed under its own locks; it rolled back whole."""

    def __init__(self, revision: str, findings: list[Any]) -> None:
        self.revision, self.findings = revision, findings
        lines = [f"revision {revision} refused, nothing was changed:"]
        lines += [f"  {f}" for f in findings]
        super().__init__("\n".join(lines))


class LockBudgetExceeded(MigrationError):
    """A revision's transaction held other locks than its declared budget (or one of its
    online path's transactions held more than its ceiling); rolled back."""

    def __init__(
        self,
        revision: str,
        problems: list[str],
        online: str | None = None,
        *,
        observed: bool = False,
    ) -> None:
        self.revision, self.problems = revision, problems
        if online is None:
            what, fact = f"revision {revision} broke its lock budget", "the budget is `locks`"
        else:  # `online`: the online path's transaction that broke its ceiling
            what = f"revision {revision}'s online path ({online}) broke its lock ceiling"
            fact = "the ceiling is `online_locks`"
        # observed: an autocommit statement, seen from another session; it has run
        outcome = "observed while it ran" if observed else "nothing was changed"
        super().__init__(
            f"{what}, {outcome}: " + "; ".join(problems) + f" ({fact} in versions/{revision}.py)"
        )


class AlreadyApplied(MigrationError):
    """Another runner applied this revision first (found under the runner lock): skipped."""

    def __init__(self, revision: str, found: str | None) -> None:
        self.revision, self.found = revision, found
        super().__init__(f"revision {revision} was applied by another runner (found {found})")


class RunnerBusy(MigrationError):
    """Another runner held the runner lock for longer than this one waits."""

    def __init__(self, waited_ms: int) -> None:
        self.waited_ms = waited_ms
        super().__init__(
            f"another queueguard upgrade held the runner lock for {waited_ms / 1000:.0f} s"
        )


class StandbyTarget(UsageError):
    """The target is a hot standby (read-only, in recovery): writes must go to the primary."""


class LockTimeout(MigrationError):
    """A migration could not get its locks within the retry ladder."""


class IrreversibleMigration(MigrationError):
    """004 renumbers task ids; rolling back means restoring the pre-upgrade backup."""


class OlderHostsConnected(MigrationError):
    """Hosts speaking an older protocol are still connected; stop them first (or --force)."""

    def __init__(self, hosts: list[str]) -> None:
        self.hosts = hosts
        super().__init__(
            "refusing to upgrade while older-protocol hosts are connected: "
            + ", ".join(hosts)
            + " (stop them first, or pass --force)"
        )


class HostsConnected(MigrationError):
    """An online phase that fences a protocol's hosts refuses while they are connected."""

    def __init__(self, phase: str, protocol: int, hosts: list[str]) -> None:
        self.phase, self.protocol, self.hosts = phase, protocol, hosts
        super().__init__(
            f"refusing to {phase} while protocol-{protocol} hosts are connected: "
            + ", ".join(hosts)
            + " (roll or stop them first, or pass --force); what is done stays done, "
            "a later `queueguard upgrade --online` resumes here"
        )


class RolloutInProgress(MigrationError):
    """An online rollout holds the database between two revisions: the offline path waits."""

    def __init__(self, target: str, phase: str, action: str) -> None:
        self.target, self.phase = target, phase
        super().__init__(
            f"refusing to {action}: an online rollout to {target} is in progress (phase "
            f"{phase}); continue it with `queueguard upgrade --online`, or end it with "
            "`queueguard upgrade --online --phase abort` (before contract)"
        )


class RolloutRefused(MigrationError):
    """An online phase that is not due (or no longer possible) was asked for."""


class MigratorBusy(MigrationError):
    """Another online migrator holds the rollout's lease."""

    def __init__(self, holder: str, waited_s: float) -> None:
        self.holder = holder
        super().__init__(
            f"another online migrator ({holder}) held the rollout's lease for "
            f"{waited_s:.0f} s; a killed one's lease expires by itself: rerun later"
        )


class HalfApplied(MigrationError):
    """A revision another tool left half applied: some of its objects exist, the version row
    has not moved, and no progress of ours says how far it got."""


class VersionKeyedElsewhere(MigrationError):
    """Temporal's schema_version has no row for this database but has one for another name:
    a database restored under another name. Nothing runs until its row is adopted."""


class LockTooLong(MigrationError):
    """`upgrade --max-lock`: plan says a revision would hold a blocking lock longer."""


class NoOnlineForm(MigrationError):
    """`upgrade --online`: a statement over the lock budget has no online form (or its table
    holds an object a rebuild cannot carry across); nothing ran. `--force` runs it plain."""


class OnlineProofFailed(MigrationError):
    """`upgrade --online`: on the scratch copy the online forms did not end in the plain
    statements' end state (schema dump or rows); nothing ran on the target."""


class TamperedMigration(MigrationError):
    """A released migration's content no longer matches the checked-in manifest."""


class PreflightFailed(QueueguardError):
    """Preflight found blocking findings."""

    def __init__(self, findings: list[Any]) -> None:
        self.findings = findings
        super().__init__(f"preflight found {len(findings)} blocking finding(s)")


class NotOwner(QueueguardError):
    """Static membership routes this partition to another host."""

    def __init__(self, queue: str, owner: str, host: str) -> None:
        self.queue, self.owner, self.host = queue, owner, host
        super().__init__(f"queue {queue} is owned by host {owner}, not {host}")


#: SQLSTATEs of a statement that does not fit the schema (undefined table / column).
UNRESOLVED_SQLSTATES = frozenset({"42P01", "42703"})


class LegacyStatementFailed(QueueguardError):
    """A legacy statement the server rejected (e.g. undefined column on a newer schema)."""

    def __init__(self, worker: str, statement: str, sqlstate: str, message: str) -> None:
        self.worker, self.statement, self.sqlstate = worker, statement, sqlstate
        super().__init__(f"{worker} statement {statement} failed: [{sqlstate}] {message}")

    @property
    def unresolved(self) -> bool:
        return self.sqlstate in UNRESOLVED_SQLSTATES


class RebuildRefused(MigrationError):
    """`upgrade --online`: a table rewrite's shadow-table rebuild cannot carry an object of
    the table across exactly (a rule, a materialized view, partitions, no key to replay by,
    …); each is named. Nothing was changed."""
