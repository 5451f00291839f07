"""Shared machinery of the chaos scenarios (`bench/chaos_*.py`, `tests/test_reliability_*.py`).

The scripts run each scenario at full scale and print its figures; the CI tests import the
same `run()` functions and call them at small scale. What lives here:

- databases: scratch databases on the shared server (`QUEUEGUARD_PG`, embedded by default) and
  private scratch servers (`ScratchServer`: our own data directory under /tmp, optionally also
  listening on 127.0.0.1 with password authentication) that a scenario may stop, crash and
  restart without disturbing anybody else;
- `TcpProxy`: an in-process TCP proxy that understands just enough of the PostgreSQL wire
  protocol to cut a connection right after the client sent the message that commits a chosen
  statement (Sync / COMMIT), either forwarding it (the commit happens, its reply is lost) or
  not (nothing commits) — the client cannot tell which;
- the commit audit: a row trigger on `task_queues` (test instrumentation, scratch databases
  only) that records every committed load, append and checkpoint with the writer's
  `application_name`; row locks make its sequence the commit order per queue, so a stale
  owner's commit after a takeover, a range that does not grow or an ack level that moves
  backwards is visible;
- host processes (`python bench/_chaos.py host CONFIG`): a Matching host with producers and
  consumers on the queues it owns, logging every confirmed spool, every History answer and
  every delivery as JSON lines, and handling fences and lost connections the way an
  embedding application must (log, unload, back off, retry);
- the ledger: the logs and the database read back into the figures the report table shows
  (tasks produced, lost, duplicated-and-rejected, worst stall) and the violations;
- `record()`: writes one scenario's row and details into docs/reliability.md.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import uuid
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote

import psycopg

from queueguard.core.keys import PhysicalQueue, decode
from queueguard.pg import scratch, servers
from queueguard.pg.connect import connection
from queueguard.upgrade.runner import upgrade

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "bench"
DOC = ROOT / "docs" / "reliability.md"
PYTHON = sys.executable


def say(message: str) -> None:
    print(message, flush=True)


# --- databases ---------------------------------------------------------------------------------
def admin_dsn() -> str:
    """Admin DSN of the shared scratch server (QUEUEGUARD_PG, embedded by default)."""
    return scratch.server_dsn()


@contextlib.contextmanager
def scratch_database(
    admin: str | None = None, *, revision: str | None = "004", template: str | None = None
) -> Iterator[str]:
    """A database of our own (empty, at `revision`, or a clone of `template`), then dropped."""
    admin = admin or admin_dsn()
    dsn = scratch.create_database(admin, template=template, prefix="qg_chaos")
    try:
        if template is None and revision is not None:
            upgrade(dsn, to=revision, progress=False)
        yield dsn
    finally:
        scratch.drop_database(admin, scratch.dbname_of(dsn))


def query(dsn: str, sql: str, params: Any = None) -> list[tuple[Any, ...]]:
    with connection(dsn, application_name="qg-chaos-check", autocommit=True) as conn:
        cur = conn.execute(sql, params)
        return cur.fetchall() if cur.description else []


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class ScratchServer:
    """A private PostgreSQL server (embedded binaries, data directory under /tmp).

    Unlike the shared embedded server, a scenario may stop, crash and restart it. With
    `tcp=True` it also listens on 127.0.0.1:<port> and accepts password (SCRAM) logins
    there; the Unix socket stays trust-only for the `postgres` superuser (no password).
    """

    def __init__(self, *, tcp: bool = False) -> None:
        self.base = Path(tempfile.mkdtemp(prefix="qg-chaos-", dir="/tmp"))
        self.base.chmod(0o755)  # as root the server runs as the queueguard user
        self.tcp = tcp
        settings = ("listen_addresses=127.0.0.1",) if tcp else ()
        self.server = servers.LocalServer(
            self.base / "pgdata", servers.embedded_bin_dir(), port=free_port(), settings=settings
        )

    @property
    def port(self) -> int:
        return self.server.port

    def start(self) -> str:
        first = not (self.server.data_dir / "PG_VERSION").exists()
        dsn = self.server.ensure_running()
        if first and self.tcp:
            self._allow_passwords_over_tcp()
        return dsn

    def _allow_passwords_over_tcp(self) -> None:
        hba = self.server.data_dir / "pg_hba.conf"
        text = re.sub(
            r"^(host\s+all\s+all\s+127\.0\.0\.1/32\s+)reject\s*$",
            r"\1scram-sha-256",
            hba.read_text(),
            flags=re.MULTILINE,
        )
        hba.write_text(text)
        query(self.admin_dsn(), "SELECT pg_reload_conf()")

    def admin_dsn(self, dbname: str = "postgres") -> str:
        return self.server.dsn(dbname)

    def tcp_dsn(self, user: str, password: str, dbname: str, port: int | None = None) -> str:
        """A URL DSN with the password in it (percent-encoded), SSL and GSS off."""
        return (
            f"postgresql://{quote(user, safe='')}:{quote(password, safe='')}@127.0.0.1:"
            f"{port or self.port}/{quote(dbname, safe='')}?sslmode=disable&gssencmode=disable"
        )

    def stop(self, mode: str = "fast") -> None:
        """`fast` (clean shutdown) or `immediate` (no checkpoint: crash recovery at start)."""
        if mode == "fast":
            self.server.stop()
        else:
            self.server._run("pg_ctl", "-D", str(self.server.data_dir), "-w", "-m", mode, "stop")

    def close(self) -> None:
        try:
            with contextlib.suppress(Exception):
                self.stop("immediate")
        finally:
            shutil.rmtree(self.server.socket_dir, ignore_errors=True)
            shutil.rmtree(self.base, ignore_errors=True)

    def __enter__(self) -> ScratchServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def create_database(admin: str, name: str, owner: str | None = None) -> str:
    with connection(admin, autocommit=True) as conn:
        stmt = f'CREATE DATABASE "{name}"' + (f' OWNER "{owner}"' if owner else "")
        conn.execute(stmt)
    return scratch.database_dsn(admin, name)


# --- the proxy ---------------------------------------------------------------------------------
REPLY_LOST = "reply-lost"  # the commit message reached the server; its answer never came back
REQUEST_LOST = "request-lost"  # the connection died before the commit message was sent
_UNTYPED_REQUESTS = (80877102, 80877103, 80877104)  # cancel, SSLRequest, GSSENCRequest


def _cstr(data: bytes) -> tuple[str, bytes]:
    end = data.index(b"\0")
    return data[:end].decode("utf-8", "replace"), data[end + 1 :]


@dataclass
class Cut:
    """One connection the proxy cut: which statement it was committing, and how."""

    statement: str
    mode: str
    backend_pid: int | None


class _Link:
    """One client connection through the proxy: two pump threads."""

    def __init__(self, proxy: TcpProxy, client: socket.socket) -> None:
        self.proxy, self.client = proxy, client
        self.server = socket.create_connection(proxy.upstream)
        self.cut = False
        self.backend_pid: int | None = None
        threading.Thread(target=self._client_to_server, daemon=True).start()
        threading.Thread(target=self._server_to_client, daemon=True).start()

    def close(self) -> None:
        self.cut = True
        for sock in (self.client, self.server):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            with contextlib.suppress(OSError):
                sock.close()

    def _server_to_client(self) -> None:
        buf, parsing = b"", True
        try:
            while data := self.server.recv(65536):
                if self.cut:
                    return
                if parsing:  # find BackendKeyData ('K': the backend's pid) before ReadyForQuery
                    buf += data
                    while len(buf) >= 5 and len(buf) >= 1 + int.from_bytes(buf[1:5], "big"):
                        size = 1 + int.from_bytes(buf[1:5], "big")
                        msg, buf = buf[:size], buf[size:]
                        if msg[:1] == b"K":
                            self.backend_pid = int.from_bytes(msg[5:9], "big")
                        elif msg[:1] == b"Z":
                            parsing = False
                self.client.sendall(data)
        except OSError:
            pass
        finally:
            if not self.cut:
                self.close()

    def _client_to_server(self) -> None:
        buf, startup = b"", True
        statements: dict[str, str] = {}
        current, batch = "", []
        try:
            while data := self.client.recv(65536):
                buf += data
                out = bytearray()
                while True:
                    if startup:
                        if len(buf) < 8 or len(buf) < int.from_bytes(buf[:4], "big"):
                            break
                        size = int.from_bytes(buf[:4], "big")
                        code = int.from_bytes(buf[4:8], "big")
                        out += buf[:size]
                        buf = buf[size:]
                        startup = code in _UNTYPED_REQUESTS
                        continue
                    if len(buf) < 5 or len(buf) < 1 + int.from_bytes(buf[1:5], "big"):
                        break
                    size = 1 + int.from_bytes(buf[1:5], "big")
                    msg, buf = buf[:size], buf[size:]
                    kind, body = msg[:1], msg[5:]
                    committing: list[str] = []
                    if kind == b"P":
                        name, rest = _cstr(body)
                        statements[name], _ = _cstr(rest)
                        current = statements[name]
                    elif kind == b"B":
                        _, rest = _cstr(body)
                        current = statements.get(_cstr(rest)[0], "")
                    elif kind == b"E":
                        batch.append(current)
                    elif kind == b"S":
                        committing, batch = batch, []
                    elif kind == b"Q":
                        committing = [_cstr(body)[0]]
                    mode = self.proxy._take_fault(committing)
                    if mode is not None:
                        self.server.sendall(bytes(out))
                        self._fault(mode, msg, committing)
                        return
                    out += msg
                if out:
                    self.server.sendall(bytes(out))
        except OSError:
            pass
        finally:
            if not self.cut:
                self.close()

    def _fault(self, mode: str, msg: bytes, committing: list[str]) -> None:
        self.cut = True  # the server->client pump drops whatever comes back from now on
        with contextlib.suppress(OSError):
            self.client.shutdown(socket.SHUT_RDWR)
        self.client.close()
        if mode == REPLY_LOST:  # the commit goes through; the server then reads EOF
            with contextlib.suppress(OSError):
                self.server.sendall(msg)
        with contextlib.suppress(OSError):
            self.server.shutdown(socket.SHUT_WR)
        self.proxy._cut_done(Cut(" / ".join(committing)[:200], mode, self.backend_pid))
        time.sleep(0.05)
        with contextlib.suppress(OSError):
            self.server.close()


class TcpProxy:
    """127.0.0.1:<port> → upstream, cutting one connection on demand (see `arm`)."""

    def __init__(self, upstream_port: int) -> None:
        self.upstream = ("127.0.0.1", upstream_port)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = int(self._listener.getsockname()[1])
        self._lock = threading.Lock()
        self._armed: tuple[Callable[[str], bool], str] | None = None
        self._cut_event = threading.Event()
        self.cuts: list[Cut] = []
        self.links: list[_Link] = []
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            with self._lock:
                self.links.append(_Link(self, client))

    def arm(self, matches: Callable[[str], bool], mode: str) -> None:
        """Cut the next connection that commits a statement for which `matches(sql)` holds."""
        with self._lock:
            self._armed = (matches, mode)
            self._cut_event.clear()

    def disarm(self) -> None:
        with self._lock:
            self._armed = None

    def _take_fault(self, committing: list[str]) -> str | None:
        if not committing:
            return None
        with self._lock:
            if self._armed is None or not any(self._armed[0](q) for q in committing):
                return None
            mode = self._armed[1]
            self._armed = None
            return mode

    def _cut_done(self, cut: Cut) -> None:
        with self._lock:
            self.cuts.append(cut)
        self._cut_event.set()

    def wait_cut(self, timeout: float = 10.0) -> Cut:
        if not self._cut_event.wait(timeout):
            raise AssertionError("the armed proxy cut nothing")
        with self._lock:
            return self.cuts[-1]

    def close(self) -> None:
        self._closed = True
        with contextlib.suppress(OSError):
            self._listener.close()
        with self._lock:
            links = list(self.links)
        for link in links:
            link.close()


def wait_backend_gone(admin: str, pid: int | None, timeout: float = 30.0) -> float:
    """Wait until a server backend has exited (its last transaction committed or not)."""
    started = time.monotonic()
    if pid is None:
        return 0.0
    while time.monotonic() - started < timeout:
        if not query(admin, "SELECT 1 FROM pg_stat_activity WHERE pid = %s", (pid,)):
            return time.monotonic() - started
        time.sleep(0.01)
    raise AssertionError(f"backend {pid} still there after {timeout}s")


# --- the commit audit --------------------------------------------------------------------------
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


# --- history and payloads ----------------------------------------------------------------------
def identity(payload: dict[str, Any]) -> tuple[str, int]:
    task = payload["task"]
    return (task["runId"], task["scheduledEventId"])


def queues_for(
    hosts: Sequence[str], per_host: int, namespace: str = "chaos", family: str = "orders"
) -> list[PhysicalQueue]:
    """Partitions of one family (workflow and activity alternating) until static membership
    routes `per_host` of them to every host."""
    from queueguard.runtime.membership import StaticMembership

    membership = StaticMembership(tuple(hosts))
    owned: dict[str, list[PhysicalQueue]] = {h: [] for h in hosts}
    partition = 0
    while any(len(q) < per_host for q in owned.values()):
        queue = PhysicalQueue(namespace, family, ("workflow", "activity")[partition % 2], partition)
        bucket = owned[membership.owner(queue)]
        if len(bucket) < per_host:
            bucket.append(queue)
        partition += 1
        assert partition < 10_000
    return sorted(q for qs in owned.values() for q in qs)


# --- host processes ----------------------------------------------------------------------------
@dataclass
class HostConfig:
    dsn: str
    host: str
    hosts: list[str]  # this host's view of the membership
    queues: list[str]  # keys; the host serves those it owns
    folder: str  # logs and the drain flag live here
    incarnation: int = 0
    produce_interval: float = 0.01
    poll_timeout: float = 0.05  # how long a parked poll waits for a sync match
    sync_share: float = 0.1  # share of polls that park (the rest take the backlog or return)
    producers_per_queue: int = 1
    consumers_per_queue: int = 1
    poll_batch: int = 1  # > 1: consumers use Matching.poll_batch
    pool_size: int = 4
    backoff: tuple[float, float] = (0.02, 0.5)  # first and largest pause after an error
    matching: dict[str, Any] = field(default_factory=dict)  # Matching keyword options

    @property
    def app_host_id(self) -> str:
        """The store's host id (application_name): one per incarnation, for the audit."""
        return f"{self.host}.{self.incarnation}"


class _Log:
    """JSON lines appended with one write(2) each: whole lines survive a SIGKILL."""

    def __init__(self, path: Path) -> None:
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    def __call__(self, **event: Any) -> None:
        event["t"] = round(time.time(), 4)
        os.write(self._fd, (json.dumps(event, separators=(",", ":")) + "\n").encode())


class LedgerHistory:
    """A History that logs every answer it gives (which identity, which outcome)."""

    def __init__(self, inner: Any, log: _Log) -> None:
        self.inner, self._log = inner, log

    def add_execution(self, execution: Any) -> None:
        self.inner.add_execution(execution)

    def schedule_task(self, run_id: str, scheduled_event_id: int, kind: str) -> None:
        self.inner.schedule_task(run_id, scheduled_event_id, kind)

    def set_status(self, run_id: str, status: str) -> None:
        self.inner.set_status(run_id, status)

    def record_task_started(self, run_id: str, scheduled_event_id: int) -> Any:
        outcome = self.inner.record_task_started(run_id, scheduled_event_id)
        self._log(e="start", run=run_id, ev=scheduled_event_id, o=outcome.value)
        return outcome

    def record_tasks_started(self, identities: Sequence[tuple[str, int]]) -> Any:
        outcomes = self.inner.record_tasks_started(identities)
        for (run_id, event), outcome in zip(identities, outcomes, strict=True):
            self._log(e="start", run=run_id, ev=event, o=outcome.value)
        return outcomes


def _host_main(cfg: HostConfig) -> None:
    from queueguard.core.history import task_payload
    from queueguard.core.store import Execution
    from queueguard.errors import ConnectionFailed, NotOwner, QueueUnloaded, StaleRangeError
    from queueguard.runtime.matching import Matching
    from queueguard.runtime.membership import StaticMembership
    from queueguard.stores.postgres import PostgresStore

    folder = Path(cfg.folder)
    log = _Log(folder / f"{cfg.host}.{cfg.incarnation}.log")
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    drain_flag = folder / "drain"
    log(e="boot", host=cfg.host, inc=cfg.incarnation)
    store = PostgresStore(cfg.dsn, host_id=cfg.app_host_id, pool_size=cfg.pool_size)
    history = LedgerHistory(store.history, log)

    def on_fenced(queue: PhysicalQueue, exc: StaleRangeError) -> None:
        # every fence, also the ones Matching does not raise (a checkpoint after an ack)
        log(e="fenced", q=queue.key, role="fence", err=type(exc).__name__, msg=str(exc)[:160])

    matching = Matching(
        store,
        cfg.host,
        StaticMembership(tuple(cfg.hosts)),
        history=history,
        on_fenced=on_fenced,
        **cfg.matching,
    )
    fenced = (QueueUnloaded, NotOwner)  # StaleRangeError is logged by on_fenced
    lost = (psycopg.Error, ConnectionFailed)

    def guarded(
        queue: PhysicalQueue, role: str, pause: list[float], step: Callable[[], None]
    ) -> None:
        try:
            step()
            pause[0] = cfg.backoff[0]
            return
        except StaleRangeError:
            pass  # logged by on_fenced
        except fenced as exc:
            log(e="fenced", q=queue.key, role=role, err=type(exc).__name__, msg=str(exc)[:160])
        except lost as exc:
            log(e="dberror", q=queue.key, role=role, err=type(exc).__name__, msg=str(exc)[:160])
            with contextlib.suppress(Exception):  # a host that lost its connection reloads
                matching.unload(queue)
        except Exception as exc:
            log(e="crash", q=queue.key, role=role, err=repr(exc), tb=traceback.format_exc())
        stop.wait(pause[0])
        pause[0] = min(pause[0] * 2, cfg.backoff[1])

    def producer(queue: PhysicalQueue, n: int) -> None:
        pause = [cfg.backoff[0]]
        pending: dict[str, Any] = {}

        def step() -> None:
            if not pending:
                run_id = str(uuid.uuid4())
                wf = f"wf-{run_id[:8]}"
                history.add_execution(Execution(run_id, queue.namespace, wf))
                history.schedule_task(run_id, 1, queue.task_type)
                pending["p"] = task_payload(queue.namespace, wf, run_id, queue.task_type, 1)
            payload = pending["p"]
            result = matching.add_task(queue, payload)  # a retry re-sends the same task
            pending.clear()
            log(
                e="produced",
                q=queue.key,
                run=payload["task"]["runId"],
                ev=1,
                id=result.task_id,
                sync=result.sync_matched,
                o=result.outcome.value if result.outcome else None,
            )

        while not stop.is_set() and not drain_flag.exists():
            guarded(queue, f"producer{n}", pause, step)
            stop.wait(cfg.produce_interval)

    def consumer(queue: PhysicalQueue, n: int) -> None:
        pause = [cfg.backoff[0]]
        rnd = random.Random()

        def step() -> None:
            park = cfg.poll_timeout if rnd.random() < cfg.sync_share else 0.0
            if cfg.poll_batch > 1:
                deliveries = matching.poll_batch(queue, cfg.poll_batch, timeout=park)
            else:
                delivery = matching.poll(queue, timeout=park)
                deliveries = [delivery] if delivery is not None else []
            if not deliveries and not park:
                stop.wait(cfg.produce_interval)
            for delivery in deliveries:
                run, ev = identity(delivery.data)
                log(e="delivered", q=queue.key, id=delivery.task_id, run=run, ev=ev)

        while not stop.is_set():
            guarded(queue, f"consumer{n}", pause, step)

    threads = []
    for key in cfg.queues:
        queue = decode(key)
        assert isinstance(queue, PhysicalQueue)
        if not matching.owns(queue):
            continue
        for n in range(cfg.producers_per_queue):
            threads.append(threading.Thread(target=producer, args=(queue, n), daemon=True))
        for n in range(cfg.consumers_per_queue):
            threads.append(threading.Thread(target=consumer, args=(queue, n), daemon=True))
    for t in threads:
        t.start()
    log(e="ready", threads=len(threads))
    stop.wait()
    for t in threads:
        t.join(10)
    try:
        matching.shutdown()
    except Exception as exc:
        log(e="shutdown-error", err=repr(exc))
    store.close()
    log(e="exit")


class HostProcess:
    """One host id, run as successive processes (incarnations) by the parent."""

    def __init__(self, cfg: HostConfig) -> None:
        self.cfg = cfg
        self.proc: subprocess.Popen[bytes] | None = None
        self.kills = 0

    def start(self) -> None:
        self.cfg.incarnation += 1
        folder = Path(self.cfg.folder)
        err = (folder / f"{self.cfg.host}.{self.cfg.incarnation}.err").open("wb")
        args = [PYTHON, str(BENCH / "_chaos.py"), "host", json.dumps(self.cfg.__dict__)]
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=err)
        err.close()

    def wait_ready(self, timeout: float = 60.0) -> None:
        log = Path(self.cfg.folder) / f"{self.cfg.host}.{self.cfg.incarnation}.log"
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise AssertionError(f"host {self.cfg.host} died: {self.stderr()}")
            if log.exists() and '"e":"ready"' in log.read_text():
                return
            time.sleep(0.05)
        raise AssertionError(f"host {self.cfg.host} not ready after {timeout}s")

    def stderr(self) -> str:
        path = Path(self.cfg.folder) / f"{self.cfg.host}.{self.cfg.incarnation}.err"
        return path.read_text(errors="replace")[-3000:] if path.exists() else ""

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(30)
        self.kills += 1

    def terminate(self, timeout: float = 60.0) -> int:
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(30)
            raise AssertionError(f"host {self.cfg.host} ignored SIGTERM for {timeout}s") from None


def wait_drained(dsn: str, timeout: float) -> float:
    """Wait until every queue's ack level reached its last task id and no row is left."""
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        ((undone, rows),) = query(
            dsn,
            "SELECT (SELECT count(*) FROM task_queues WHERE ack_level < last_task_id), "
            "(SELECT count(*) FROM tasks)",
        )
        if undone == 0 and rows == 0:
            return time.monotonic() - started
        time.sleep(0.2)
    raise AssertionError(f"queues not drained after {timeout}s: {undone} queues, {rows} rows")


# --- the ledger --------------------------------------------------------------------------------
@dataclass
class Ledger:
    """What the hosts logged, read back."""

    produced: dict[tuple[str, int], int] = field(default_factory=dict)  # confirmed adds
    starts: Counter[str] = field(default_factory=Counter)  # History answers by outcome
    started_by_host: Counter[tuple[str, int]] = field(default_factory=Counter)
    delivered: Counter[tuple[str, int]] = field(default_factory=Counter)
    fenced: Counter[tuple[str, str]] = field(default_factory=Counter)  # (host.inc, queue)
    dberrors: int = 0
    dberrors_by: Counter[tuple[str, str]] = field(default_factory=Counter)
    crashes: list[str] = field(default_factory=list)
    shutdown_errors: list[str] = field(default_factory=list)
    events: int = 0


def read_ledger(folder: Path) -> Ledger:
    ledger = Ledger()
    for path in sorted(folder.glob("*.log")):
        for line in path.read_text().splitlines():
            try:
                ev = json.loads(line)
            except json.JSONDecodeError:  # a torn last line cannot happen (one write per line)
                ledger.crashes.append(f"{path.name}: unparsable line {line[:80]!r}")
                continue
            ledger.events += 1
            kind = ev["e"]
            if kind == "produced":
                key = (ev["run"], ev["ev"])
                ledger.produced[key] = ledger.produced.get(key, 0) + 1
                if ev["sync"]:
                    ledger.delivered[key] += 1
            elif kind == "start":
                ledger.starts[ev["o"]] += 1
                if ev["o"] == "started":
                    ledger.started_by_host[(ev["run"], ev["ev"])] += 1
            elif kind == "delivered":
                ledger.delivered[(ev["run"], ev["ev"])] += 1
            elif kind == "fenced":
                ledger.fenced[(path.stem, ev["q"])] += 1
            elif kind == "dberror":
                ledger.dberrors += 1
                ledger.dberrors_by[(path.stem, ev["q"])] += 1
            elif kind == "crash":
                ledger.crashes.append(f"{path.name}: {ev['err']}\n{ev['tb']}")
            elif kind == "shutdown-error":
                ledger.shutdown_errors.append(f"{path.name}: {ev['err']}")
    return ledger


@dataclass
class Outcome:
    """The figures of one run and everything that went wrong."""

    produced: int
    lost: int
    duplicated_rejected: int
    orphaned_starts: int  # started in History, never handed to a worker (see docs)
    worst_stall_s: float
    audit: AuditReport
    ledger: Ledger
    violations: list[str]

    def as_json(self) -> dict[str, Any]:
        return {
            "produced": self.produced,
            "lost": self.lost,
            "duplicated_rejected": self.duplicated_rejected,
            "orphaned_starts": self.orphaned_starts,
            "worst_stall_s": round(self.worst_stall_s, 3),
            "loads": self.audit.loads,
            "appends": self.audit.appends,
            "checkpoints": self.audit.checkpoints,
            "fences_logged": sum(self.ledger.fenced.values()),
            "connection_errors": self.ledger.dberrors,
            "violations": self.violations[:20],
        }


def drain_and_judge(
    procs: Sequence[Any], dsn: str, folder: Path, window: tuple[float, float], timeout: float
) -> tuple[Outcome, float]:
    """Tell the hosts to drain, wait for it, stop them and judge the run; an error a host
    printed instead of logging is a violation too. Returns the outcome and the drain time."""
    (folder / "drain").touch()
    drain_s = wait_drained(dsn, timeout)
    for p in procs:
        p.terminate()
    outcome = judge(dsn, folder, window)
    for p in procs:
        if "Traceback" in p.stderr():
            outcome.violations.append(f"{p.cfg.host} stderr: {p.stderr()}")
    return outcome, drain_s


def reap(procs: Sequence[Any]) -> None:
    """Kill whatever host process is still running (a failed run must not leave any)."""
    for p in procs:
        if p.proc is not None and p.proc.poll() is None:
            p.proc.kill()
            p.proc.wait()


def judge(dsn: str, folder: Path, window: tuple[float, float]) -> Outcome:
    """Read the logs, the audit and History; list every broken promise."""
    ledger = read_ledger(folder)
    audit = check_audit(read_audit(dsn), window)
    started = {
        (str(r), e)
        for r, e in query(
            dsn,
            "SELECT run_id, scheduled_event_id FROM scheduled_tasks WHERE started_at IS NOT NULL",
        )
    }
    violations = list(audit.violations) + check_task_audit(dsn, started)
    lost = [k for k in ledger.produced if k not in started]
    violations += [f"lost: {run}/{ev} was confirmed but never started" for run, ev in lost[:10]]
    twice = [k for k, n in ledger.started_by_host.items() if n > 1]
    violations += [f"started twice: {k}" for k in twice[:10]]
    violations += [f"unexpected error: {c}" for c in ledger.crashes[:5]]
    ((undone, rows),) = query(
        dsn,
        "SELECT (SELECT count(*) FROM task_queues WHERE ack_level < last_task_id), "
        "(SELECT count(*) FROM tasks)",
    )
    if undone or rows:
        violations.append(f"not drained: {undone} queues below last_task_id, {rows} rows left")
    delivered = set(ledger.delivered)
    orphans = len(started - delivered)
    return Outcome(
        produced=len(ledger.produced),
        lost=len(lost),
        duplicated_rejected=ledger.starts["already-started"],
        orphaned_starts=orphans,
        worst_stall_s=audit.worst_gap_s,
        audit=audit,
        ledger=ledger,
        violations=violations,
    )


# --- the report --------------------------------------------------------------------------------
TABLE_START, TABLE_END = "<!-- chaos-table:start -->", "<!-- chaos-table:end -->"
COLUMNS = (
    "#",
    "Scenario",
    "Scale",
    "Faults injected",
    "Tasks produced",
    "Lost",
    "Duplicated-and-rejected",
    "Worst stall",
    "CI test (small scale)",
)


_BLOCK = re.compile(
    r"<!-- chaos-details:(\d+):start -->\n.*?<!-- chaos-details:\1:end -->\n*", re.S
)


def record(number: int, row: dict[str, Any], details: Sequence[str], doc: Path = DOC) -> None:
    """Replace scenario `number`'s table row and its generated block in docs/reliability.md
    (blocks are kept in scenario order at the end of the page)."""
    text = doc.read_text(encoding="utf-8")
    head, rest = text.split(TABLE_START, 1)
    table, tail = rest.split(TABLE_END, 1)
    rows: dict[int, str] = {}
    for line in table.strip().splitlines()[2:]:
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if cells and cells[0].isdigit():
            rows[int(cells[0])] = line
    values = [str(number), *(str(row[c]) for c in COLUMNS[1:])]
    rows[number] = "| " + " | ".join(v.replace("|", "\\|") for v in values) + " |"
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "|".join("---" for _ in COLUMNS) + "|"]
    lines += [rows[n] for n in sorted(rows)]
    text = head + TABLE_START + "\n" + "\n".join(lines) + "\n" + TABLE_END + tail
    blocks = {int(m.group(1)): m.group(0).rstrip("\n") for m in _BLOCK.finditer(text)}
    text = _BLOCK.sub("", text).rstrip("\n")
    stamp = f"_Generated {datetime.now(UTC):%Y-%m-%d %H:%M} UTC, {os.cpu_count()} CPUs._"
    blocks[number] = "\n".join(
        [
            f"<!-- chaos-details:{number}:start -->",
            f"### {number}. {row['Scenario']}",
            "",
            stamp,
            "",
            *details,
            f"<!-- chaos-details:{number}:end -->",
        ]
    )
    text += "\n\n" + "\n\n".join(blocks[n] for n in sorted(blocks)) + "\n"
    doc.write_text(text, encoding="utf-8")


def seconds(value: float) -> str:
    return f"{value * 1000:.0f} ms" if value < 1 else f"{value:.2f} s"


def rng(seed: int | None) -> random.Random:
    return random.Random(seed if seed is not None else int(time.time()))


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "host":
        raw = json.loads(sys.argv[2])
        raw["backoff"] = tuple(raw["backoff"])
        _host_main(HostConfig(**raw))
    else:
        raise SystemExit("usage: _chaos.py host CONFIG_JSON (spawned by the chaos scenarios)")
