"""The commit audit: every committed change of `task_queues` and `tasks`, replayed and judged.

A row trigger on `task_queues` (test instrumentation, scratch databases only) records every
committed load, append and checkpoint with the writer's `application_name`; row locks make
its sequence the commit order per queue, so a stale owner's commit after a takeover, a
range that does not grow or an ack level that moves backwards is visible. A statement
trigger on `tasks` keeps the ground truth of committed task rows.
"""

from __future__ import annotations

import itertools
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime

from bench.common.databases import query
from queueguard.pg.connect import connection

AUDIT_SQL = """
CREATE TABLE chaos_audit (
    seq bigserial PRIMARY KEY,
    at timestamptz NOT NULL DEFAULT clock_timestamp(),
    app text NOT NULL DEFAULT current_setting('application_name'),
    physical_queue text NOT NULL,
    old_range bigint, new_range bigint NOT NULL,
    old_ack bigint, new_ack bigint NOT NULL,
    old_last bigint, new_last bigint NOT NULL
);
CREATE FUNCTION chaos_audit() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO chaos_audit (physical_queue, new_range, new_ack, new_last)
        VALUES (NEW.physical_queue, NEW.range_id, NEW.ack_level, NEW.last_task_id);
    ELSE
        INSERT INTO chaos_audit (physical_queue, old_range, new_range, old_ack, new_ack,
                                 old_last, new_last)
        VALUES (NEW.physical_queue, OLD.range_id, NEW.range_id, OLD.ack_level, NEW.ack_level,
                OLD.last_task_id, NEW.last_task_id);
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER chaos_audit AFTER INSERT OR UPDATE ON task_queues
    FOR EACH ROW EXECUTE FUNCTION chaos_audit();
-- Ground truth of committed task rows (a rolled-back insert leaves no audit row either).
CREATE TABLE chaos_task_audit (
    physical_queue text NOT NULL,
    task_id bigint NOT NULL,
    run_id text,
    scheduled_event_id bigint,
    PRIMARY KEY (physical_queue, task_id)
);
CREATE FUNCTION chaos_task_audit() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO chaos_task_audit
    SELECT n.physical_queue, n.task_id, n.data -> 'task' ->> 'runId',
           (n.data -> 'task' ->> 'scheduledEventId')::bigint
    FROM new_rows n;
    RETURN NULL;
END $$;
CREATE TRIGGER chaos_task_audit AFTER INSERT ON tasks
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION chaos_task_audit();
"""


def install_audit(dsn: str) -> None:
    """Instrument a scratch database (never a real one): audit every task_queues commit."""
    with connection(dsn, autocommit=True) as conn:
        conn.execute(AUDIT_SQL)


@dataclass(frozen=True)
class AuditRow:
    seq: int
    at: float  # epoch seconds (server clock = this machine's clock)
    app: str
    queue: str
    old_range: int | None
    new_range: int
    old_ack: int | None
    new_ack: int
    old_last: int | None
    new_last: int

    @property
    def kind(self) -> str:
        if self.old_range is None or self.new_range != self.old_range:
            return "load"
        if self.new_last != self.old_last:
            return "append"
        return "checkpoint"


@dataclass
class AuditReport:
    rows: list[AuditRow]
    loads: int = 0
    appends: int = 0
    checkpoints: int = 0
    tasks_appended: int = 0
    violations: list[str] = field(default_factory=list)
    worst_gap_s: float = 0.0
    worst_gap_at: str = ""

    def loads_by(self) -> Counter[tuple[str, str]]:
        """(queue, application_name) -> loads."""
        return Counter((r.queue, r.app) for r in self.rows if r.kind == "load")


def read_audit(dsn: str) -> list[AuditRow]:
    rows = query(
        dsn,
        "SELECT seq, extract(epoch FROM at)::float8, app, physical_queue, old_range, new_range, "
        "old_ack, new_ack, old_last, new_last FROM chaos_audit ORDER BY seq",
    )
    return [AuditRow(*r) for r in rows]


def check_audit(rows: list[AuditRow], window: tuple[float, float] | None = None) -> AuditReport:
    """Replay the commit history of every queue against the history of its ranges.

    Every append and checkpoint must come from the connection (application_name) that made
    the latest load of that queue, with that load's range; ranges grow by one per load, the
    ack level and last_task_id never move backwards, ack <= last. `worst_gap_s` is the
    longest time a queue went without any commit inside `window` (epoch seconds).
    """
    report = AuditReport(rows)
    by_queue: dict[str, list[AuditRow]] = defaultdict(list)
    for row in rows:
        by_queue[row.queue].append(row)
    for queue, history in by_queue.items():
        owner: AuditRow | None = None
        previous: AuditRow | None = None
        for row in history:
            where = f"{queue} seq {row.seq} ({row.app})"
            if previous is not None and (row.old_range, row.old_ack, row.old_last) != (
                previous.new_range,
                previous.new_ack,
                previous.new_last,
            ):
                report.violations.append(f"{where}: audit chain broken")
            if row.new_ack > row.new_last:
                report.violations.append(f"{where}: ack {row.new_ack} > last {row.new_last}")
            if row.old_ack is not None and row.new_ack < row.old_ack:
                report.violations.append(
                    f"{where}: ack level moved back {row.old_ack}->{row.new_ack}"
                )
            if row.old_last is not None and row.new_last < row.old_last:
                report.violations.append(f"{where}: last_task_id moved back")
            if row.kind == "load":
                report.loads += 1
                expected = 1 if row.old_range is None else row.old_range + 1
                if row.new_range != expected:
                    report.violations.append(f"{where}: load took range {row.new_range}")
                if row.old_range is not None and (
                    row.new_ack != row.old_ack or row.new_last != row.old_last
                ):
                    report.violations.append(f"{where}: a load changed ack/last")
                owner = row
            else:
                if owner is None or row.app != owner.app or row.new_range != owner.new_range:
                    holder = f"{owner.app} range {owner.new_range}" if owner else "nobody"
                    report.violations.append(
                        f"{where}: {row.kind} with range {row.new_range} while {holder} owned it"
                    )
                if row.kind == "append":
                    report.appends += 1
                    report.tasks_appended += row.new_last - (row.old_last or 0)
                    if row.new_ack != row.old_ack:
                        report.violations.append(f"{where}: an append moved the ack level")
                else:
                    report.checkpoints += 1
            previous = row
        times = [r.at for r in history]
        if window is not None:
            times = [window[0], *(t for t in times if window[0] <= t <= window[1]), window[1]]
        for a, b in itertools.pairwise(times):
            if b - a > report.worst_gap_s:
                report.worst_gap_s = b - a
                report.worst_gap_at = f"{queue} at {datetime.fromtimestamp(a, UTC):%H:%M:%S}"
    return report


def committed_tasks(dsn: str) -> dict[str, list[tuple[int, str, int]]]:
    """queue -> [(task id, run id, scheduled event id)] of every task row ever committed."""
    out: dict[str, list[tuple[int, str, int]]] = defaultdict(list)
    for queue, task_id, run_id, event in query(
        dsn,
        "SELECT physical_queue, task_id, run_id, scheduled_event_id FROM chaos_task_audit "
        "ORDER BY physical_queue, task_id",
    ):
        out[queue].append((task_id, run_id, event))
    return out


def check_task_audit(dsn: str, started: set[tuple[str, int]]) -> list[str]:
    """Ids stay consecutive (every allocated id has a committed row: 1..last_task_id) and
    every committed row, confirmed to its producer or not, was started in History."""
    violations = []
    last = dict(query(dsn, "SELECT physical_queue, last_task_id FROM task_queues"))
    for queue, rows in committed_tasks(dsn).items():
        ids = [r[0] for r in rows]
        if ids != list(range(1, last.get(queue, 0) + 1)):
            gaps = sorted(set(range(1, last.get(queue, 0) + 1)) - set(ids))[:10]
            violations.append(f"{queue}: committed ids are not 1..{last.get(queue)}: gaps {gaps}")
        never = [(r, e) for _, r, e in rows if (r, e) not in started]
        if never:
            violations.append(f"{queue}: {len(never)} committed tasks never started: {never[:3]}")
    return violations
