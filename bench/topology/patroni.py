"""A two-node Patroni cluster on loopback with PgBouncer in front, for the failover tests and
benchmarks. Test and bench infrastructure only: queueguard never depends on Patroni.

What runs, all under one temporary directory (as root: owned by, and run as, the service
user that runs the embedded server, since PostgreSQL refuses root):

* **etcd** (Debian's `etcd-server`) on two free loopback ports, one member, the DCS;
* **two Patroni agents** (Debian's `patroni`, its `etcd3` DCS) managing Debian's PostgreSQL
  server binaries (15 on Debian 12): short timeouts (`ttl` 10 s, `loop_wait` 1 s,
  `retry_timeout` 3 s) so a failover takes about ten seconds; PostgreSQL listens on
  127.0.0.1 with `trust` for local roles (no password anywhere); `synchronous_mode` on
  request; `use_pg_rewind` so a killed leader can rejoin as a replica (`rejoin`), re-cloned
  when its timeline cannot be rewound;
* **PgBouncer** (`bench/topology/pgbouncer.py`, transaction pooling) whose `[databases]`
  entry points at the leader.

How PgBouncer follows the leader. PgBouncer 1.18 knows one address per database and has no
failover of its own. Each Patroni node runs an `on_role_change` callback (a shell script
written here, with the node's port as its first argument; Patroni appends the action, the
role and the scope). When the role it is given is the primary one (`master` in Patroni 3.0,
`primary` later), the script rewrites the `* = host=… port=…` line of `pgbouncer.ini` to this
node's port (a new file renamed over the old one) and sends `RELOAD` to PgBouncer's admin
console (`psql … dbname=pgbouncer`, user `postgres`, in `admin_users`). On `RELOAD` PgBouncer
sees the connection string changed and closes the pool's server connections as they are
released (the automatic equivalent of `RECONNECT`), so every new server connection goes to
the new primary; clients stay connected. A client whose transaction was running on the dead
server gets an error and reconnects or retries (the runtime does); one that was waiting for a
server connection waits on (up to `query_wait_timeout`, 30 s) and is then served by the new
primary. The script logs one line per repoint (`callbacks.log`), which `wait_for_new_leader`
waits for. (`PAUSE` + `RESUME` around the `RELOAD` would also drain a still-alive old primary,
as in a planned switchover; here the old primary is dead, and a `PAUSE` waiting on a hung
server connection would block the callback, so the script does not pause.)

A node's death is simulated by `kill_leader_node()`: the leader's Patroni agent and its
postmaster with every child are stopped (SIGSTOP, so none of them acts on another's death),
then SIGKILLed. Killing only the postmaster would not do: Patroni would restart it in place
and keep the leader key. With the agent gone the leader key expires after `ttl` and the
replica takes over; in synchronous mode only the synchronous standby may.

Also: `set_synchronous(on)` switches Patroni's `synchronous_mode` at run time (its dynamic
configuration, PATCH /config); `freeze_replication()` stops the replica's WAL receiver
(SIGSTOP) so that the replica falls behind on demand (`wal_sender_timeout` is 5 min here, so
the leader keeps it as its synchronous standby meanwhile); `ensure_healthy()` rejoins a dead
node and waits for the replica to stream.

    with PatroniCluster(synchronous=True) as cluster:
        cluster.leader_dsn("app"); cluster.pgbouncer_dsn("app")
        killed = cluster.kill_leader_node()
        failover = cluster.wait_for_new_leader(60)
        cluster.rejoin(killed)  # back as a replica (for the next failover)
"""

from __future__ import annotations

import contextlib
import json
import os
import pwd
import shlex
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
import uuid
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

import psycopg

from bench.common.servers import free_port
from bench.topology import pgbouncer
from bench.topology.pgbouncer import PgBouncer
from queueguard.pg import servers

PATRONI, ETCD = "patroni", "etcd"
PREFERRED_MAJOR = "15"  # Debian 12's PostgreSQL
PRIMARY_ROLES = ("master", "primary")  # Patroni 3.0 says master, later versions primary


def pg_bin_dir() -> Path | None:
    """Debian's PostgreSQL server binaries: 15 if installed, else the newest major."""
    found = sorted(
        (p for p in servers.SYSTEM_PG_ROOT.glob("*/bin") if (p / "postgres").exists()),
        key=lambda p: float(p.parent.name) if p.parent.name.replace(".", "").isdigit() else 0,
    )
    preferred = servers.SYSTEM_PG_ROOT / PREFERRED_MAJOR / "bin"
    if preferred in found:
        return preferred
    return found[-1] if found else None


def available() -> str | None:
    """The reason the cluster cannot run here, or None when it can."""
    if shutil.which(PATRONI) is None:
        return "patroni is not installed (Debian: apt-get install patroni)"
    if shutil.which(ETCD) is None:
        return "etcd is not installed (Debian: apt-get install etcd-server)"
    if pg_bin_dir() is None:
        return "no Debian PostgreSQL server binaries (Debian: apt-get install postgresql)"
    return pgbouncer.available()


CALLBACK = """#!/bin/sh
# Patroni on_role_change callback: <this> <node port> <action> <role> <scope>.
# When this node becomes the primary, point PgBouncer at it (written by bench/topology/patroni.py).
port="$1"; role="$3"
case "$role" in master|primary) ;; *) exit 0 ;; esac
ini={ini}
sed "s/^\\* = .*/* = host=127.0.0.1 port=$port user=postgres/" "$ini" > "$ini.new.$$"
mv "$ini.new.$$" "$ini"
{psql} -X -q "host=127.0.0.1 port={bouncer} user=postgres dbname=pgbouncer" -c RELOAD
status=$?
echo "$(date +%s.%N) $port $role $status" >> {log}
exit $status
"""


@dataclass
class Node:
    """One Patroni agent and the PostgreSQL it manages."""

    name: str
    pg_port: int
    rest_port: int
    data_dir: Path
    socket_dir: Path
    config: Path
    log: Path
    agent: subprocess.Popen[bytes] | None = None
    killed_at: float | None = None  # wall clock of the last kill

    @property
    def alive(self) -> bool:
        return self.agent is not None and self.agent.poll() is None

    def dsn(self, dbname: str = "postgres") -> str:
        return f"host=127.0.0.1 port={self.pg_port} user=postgres dbname={dbname}"

    def rest(self, path: str, timeout: float = 1.0) -> tuple[int, dict[str, object]]:
        """(HTTP status, JSON body) of Patroni's REST API; (0, {}) when it does not answer."""
        url = f"http://127.0.0.1:{self.rest_port}{path}"
        try:
            with urllib.request.urlopen(url, timeout=timeout) as reply:
                return int(reply.status), json.loads(reply.read() or b"{}")
        except urllib.error.HTTPError as exc:
            body = exc.read()
            with contextlib.suppress(ValueError):
                return int(exc.code), json.loads(body or b"{}")
            return int(exc.code), {}
        except (OSError, ValueError):
            return 0, {}

    def postmaster_pid(self) -> int | None:
        try:
            first = (self.data_dir / "postmaster.pid").read_text().split("\n", 1)[0]
            return int(first)
        except (OSError, ValueError):
            return None


@dataclass
class Failover:
    """One failover: which node died and which took over, and how long each part took."""

    old: str
    new: str
    promoted_s: float  # kill -> the new node answers as a writable primary
    repointed_s: float  # kill -> PgBouncer serves from the new primary


class PatroniCluster:
    """`with PatroniCluster(synchronous=True) as cluster: …` (see the module docstring)."""

    def __init__(
        self,
        *,
        synchronous: bool = False,
        ttl: int = 10,
        loop_wait: int = 1,
        retry_timeout: int = 3,
    ) -> None:
        bin_dir = pg_bin_dir()
        if bin_dir is None:
            raise RuntimeError(available() or "no PostgreSQL binaries")
        self.bin_dir = bin_dir
        self.synchronous = synchronous
        # Patroni wants loop_wait + 2 * retry_timeout <= ttl
        self.ttl, self.loop_wait, self.retry_timeout = ttl, loop_wait, retry_timeout
        self.base = Path(tempfile.mkdtemp(prefix="qg-patroni-", dir="/tmp"))
        self.base.chmod(0o755)
        self.scope = f"qg-{uuid.uuid4().hex[:8]}"
        self.etcd_port, self.etcd_peer_port = free_port(), free_port()
        self.etcd: subprocess.Popen[bytes] | None = None
        self.bouncer: PgBouncer | None = None
        self.callback_log = self.base / "callbacks.log"
        self.nodes = [
            Node(
                name=f"node{i}",
                pg_port=free_port(),
                rest_port=free_port(),
                data_dir=self.base / f"node{i}",
                socket_dir=self.base / f"node{i}.sock",
                config=self.base / f"node{i}.yml",
                log=self.base / f"node{i}.log",
            )
            for i in range(2)
        ]

    # -- processes -----------------------------------------------------------------------------
    def _spawn(self, argv: list[str], log: Path) -> subprocess.Popen[bytes]:
        """A child as the service user (as root), its output in `log`, in its own session."""
        env = {k: v for k, v in os.environ.items() if not k.startswith(("PG", "PYTHON"))}
        env.pop("VIRTUAL_ENV", None)
        env["HOME"] = str(self.base)
        user = _service_user()
        with log.open("ab") as out:
            return subprocess.Popen(
                argv,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                cwd=self.base,
                env=env,
                start_new_session=True,
                user=user.pw_uid if user else None,
                group=user.pw_gid if user else None,
                extra_groups=[] if user else None,
            )

    def _own(self, path: Path) -> None:
        if os.geteuid() == 0:
            shutil.chown(path, servers.SERVICE_USER, servers.SERVICE_USER)

    def _start_etcd(self) -> None:
        data = self.base / "etcd"
        data.mkdir(mode=0o700)
        self._own(data)
        client = f"http://127.0.0.1:{self.etcd_port}"
        peer = f"http://127.0.0.1:{self.etcd_peer_port}"
        argv = [
            shutil.which(ETCD) or ETCD,
            "--name=qg",
            f"--data-dir={data}",
            f"--listen-client-urls={client}",
            f"--advertise-client-urls={client}",
            f"--listen-peer-urls={peer}",
            f"--initial-advertise-peer-urls={peer}",
            f"--initial-cluster=qg={peer}",
            "--initial-cluster-state=new",
            "--logger=zap",
            "--log-level=warn",
        ]
        self.etcd = self._spawn(argv, self.base / "etcd.log")
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.etcd.poll() is not None:
                raise RuntimeError(f"etcd exited: {_tail(self.base / 'etcd.log')}")
            with (
                contextlib.suppress(OSError, ValueError),
                urllib.request.urlopen(f"{client}/health", timeout=1) as reply,
            ):
                if json.loads(reply.read()).get("health") == "true":
                    return
            time.sleep(0.1)
        raise RuntimeError(f"etcd not healthy after 30 s: {_tail(self.base / 'etcd.log')}")

    def _write_callback(self, bouncer: PgBouncer) -> Path:
        script = self.base / "on_role_change.sh"
        script.write_text(
            CALLBACK.format(
                ini=shlex.quote(str(bouncer.config_path)),
                psql=shlex.quote(str(self.bin_dir / "psql")),
                bouncer=bouncer.port,
                log=shlex.quote(str(self.callback_log)),
            )
        )
        script.chmod(0o755)
        self.callback_log.touch()
        self._own(self.callback_log)
        return script

    def _write_config(self, node: Node, callback: Path) -> None:
        address = f"127.0.0.1:{node.pg_port}"
        config = {
            "scope": self.scope,
            "namespace": "/queueguard/",
            "name": node.name,
            "restapi": {
                "listen": f"127.0.0.1:{node.rest_port}",
                "connect_address": f"127.0.0.1:{node.rest_port}",
            },
            "etcd3": {"hosts": [f"127.0.0.1:{self.etcd_port}"]},
            "bootstrap": {
                "dcs": {
                    "ttl": self.ttl,
                    "loop_wait": self.loop_wait,
                    "retry_timeout": self.retry_timeout,
                    # asynchronous mode promotes a lagging replica too: its losses are measured
                    "maximum_lag_on_failover": 1 << 40,
                    "synchronous_mode": self.synchronous,
                    "postgresql": {"use_pg_rewind": True, "use_slots": True},
                },
                "initdb": [{"encoding": "UTF8"}, {"locale": "C"}],
            },
            "postgresql": {
                "listen": address,
                "connect_address": address,
                "data_dir": str(node.data_dir),
                "bin_dir": str(self.bin_dir),
                "pgpass": str(self.base / f"{node.name}.pgpass"),
                "authentication": {
                    "superuser": {"username": "postgres"},
                    "replication": {"username": "replicator"},
                },
                "parameters": {
                    "unix_socket_directories": str(node.socket_dir),
                    "max_connections": 200,
                    # a stopped WAL receiver (freeze_replication) keeps its place for 5 min
                    "wal_sender_timeout": "5min",
                },
                "pg_hba": [
                    "local all all trust",
                    "host all all 127.0.0.1/32 trust",
                    "host replication all 127.0.0.1/32 trust",
                ],
                "callbacks": {"on_role_change": f"{callback} {node.pg_port}"},
                "remove_data_directory_on_rewind_failure": True,
                "remove_data_directory_on_diverged_timelines": True,
            },
        }
        node.config.write_text(json.dumps(config, indent=2))  # JSON is YAML

    def _start_agent(self, node: Node) -> None:
        node.socket_dir.mkdir(mode=0o700, exist_ok=True)
        self._own(node.socket_dir)
        node.agent = self._spawn([shutil.which(PATRONI) or PATRONI, str(node.config)], node.log)

    def start(self) -> PatroniCluster:
        self._own(self.base)  # Patroni writes beside its files (pgpass, its checks)
        self._start_etcd()
        first, second = self.nodes
        # PgBouncer first (its port goes into the callback), pointed at the first node, which
        # bootstraps the cluster and becomes its leader (no callback runs at bootstrap).
        self.bouncer = PgBouncer(
            first.dsn(),
            settings={
                "admin_users": "postgres",
                "server_login_retry": "1",  # retry a refused server after 1 s, not 15
                "server_connect_timeout": "3",
            },
        )
        callback = self._write_callback(self.bouncer)
        for node in self.nodes:
            self._write_config(node, callback)
        self._start_agent(first)
        self._wait(lambda: first.rest("/primary")[0] == 200, 90, f"{first.name} to lead")
        self._start_agent(second)
        self.wait_replica(second, timeout=90)
        self.bouncer.start()
        return self

    def _wait(self, done: object, timeout: float, what: str) -> None:
        assert callable(done)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for node in self.nodes:
                if node.agent is not None and node.agent.poll() is not None and not node.killed_at:
                    raise RuntimeError(f"patroni {node.name} exited: {_tail(node.log)}")
            if done():
                return
            time.sleep(0.1)
        raise TimeoutError(f"waited {timeout:.0f} s for {what}\n{self.logs()}")

    # -- what tests ask ------------------------------------------------------------------------
    def node(self, name: str) -> Node:
        (found,) = [n for n in self.nodes if n.name == name]
        return found

    def leader(self) -> Node | None:
        """The node that answers as a running primary holding the leader key, if any."""
        for node in self.nodes:
            if node.alive and node.rest("/primary")[0] == 200:
                return node
        return None

    def replica(self) -> Node:
        """The running replica (a cluster of two has one when both nodes are up)."""
        found = [n for n in self.nodes if n.alive and n.rest("/replica")[0] == 200]
        if len(found) != 1:
            raise RuntimeError(f"expected one running replica, found {[n.name for n in found]}")
        return found[0]

    def leader_dsn(self, dbname: str = "postgres") -> str:
        leader = self.leader()
        if leader is None:
            raise RuntimeError("the cluster has no leader")
        return leader.dsn(dbname)

    def replica_dsn(self, dbname: str = "postgres") -> str:
        return self.replica().dsn(dbname)

    def pgbouncer_dsn(self, dbname: str = "postgres") -> str:
        assert self.bouncer is not None
        return self.bouncer.dsn(dbname)

    def wait_replica(self, node: Node, timeout: float = 90) -> None:
        """Until `node` is a streaming replica (and, in synchronous mode, the synchronous
        standby: the one Patroni may promote)."""
        path = "/sync" if self.synchronous else "/replica"

        def ready() -> bool:
            status, state = node.rest(path)
            streaming = [r for r in _replication(self.leader()) if r == node.name]
            return status == 200 and state.get("state") == "running" and bool(streaming)

        self._wait(ready, timeout, f"{node.name} to stream as a {path[1:]} replica")

    def wait_replayed(self, timeout: float = 60) -> None:
        """Until the replica has replayed everything the leader has written so far."""
        leader, replica = self.leader(), self.replica()
        assert leader is not None
        with psycopg.connect(leader.dsn(), autocommit=True) as conn:
            target = conn.execute("SELECT pg_current_wal_lsn()").fetchone()
        assert target is not None
        with psycopg.connect(replica.dsn(), autocommit=True) as conn:

            def replayed() -> bool:
                row = conn.execute(
                    "SELECT pg_last_wal_replay_lsn() >= %s::pg_lsn", (target[0],)
                ).fetchone()
                return bool(row and row[0])

            self._wait(replayed, timeout, "the replica to replay the leader's WAL")

    def kill_leader_node(self) -> str:
        """The leader's node dies at once: its Patroni agent and its postmaster with every
        child, frozen then SIGKILLed. Returns the dead node's name."""
        leader = self.leader()
        if leader is None:
            raise RuntimeError("no leader to kill")
        self._kill_node(leader)
        return leader.name

    def _kill_node(self, node: Node) -> None:
        roots = [p for p in (node.agent.pid if node.agent else None, node.postmaster_pid()) if p]
        pids = [pid for root in roots for pid in _tree(root)]
        node.killed_at = time.time()
        for sig in (signal.SIGSTOP, signal.SIGKILL):
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, sig)
        if node.agent is not None:
            node.agent.wait(30)
        for pid in pids:  # the postmaster and its children are not ours to reap: wait them out
            deadline = time.monotonic() + 30
            while _exists(pid) and time.monotonic() < deadline:
                time.sleep(0.01)

    def wait_for_new_leader(self, timeout: float = 60) -> Failover:
        """Until another node is a writable primary and PgBouncer serves from it."""
        dead = [n for n in self.nodes if n.killed_at is not None and not n.alive]
        if not dead:
            raise RuntimeError("no node was killed")
        old = max(dead, key=lambda n: n.killed_at or 0)
        killed_at = old.killed_at or 0.0
        candidates = [n for n in self.nodes if n.alive]
        promoted: list[tuple[Node, float]] = []

        def writable() -> bool:
            for node in candidates:
                if node.rest("/primary", timeout=0.5)[0] != 200:
                    continue
                with contextlib.suppress(psycopg.Error):
                    with psycopg.connect(node.dsn(), connect_timeout=2, autocommit=True) as conn:
                        row = conn.execute("SELECT pg_is_in_recovery()").fetchone()
                    if row is not None and row[0] is False:
                        promoted.append((node, time.time() - killed_at))
                        return True
            return False

        self._wait(writable, timeout, "a new writable leader")
        new, promoted_s = promoted[0]

        def repointed() -> bool:
            for line in self.callback_log.read_text().splitlines():
                at, port, _role, status = line.split()
                if float(at) >= killed_at and int(port) == new.pg_port and status == "0":
                    return self._pgbouncer_port() == new.pg_port
            return False

        self._wait(repointed, timeout, "PgBouncer to be repointed")
        return Failover(old.name, new.name, promoted_s, time.time() - killed_at)

    def _pgbouncer_port(self) -> int | None:
        with contextlib.suppress(psycopg.Error):
            dsn = self.pgbouncer_dsn()
            with psycopg.connect(dsn, connect_timeout=3, autocommit=True) as conn:
                row = conn.execute("SELECT inet_server_port()").fetchone()
                return int(row[0]) if row else None
        return None

    def rejoin(self, name: str, timeout: float = 240) -> None:
        """Start a killed node's agent again: it rewinds (or re-clones) its data directory and
        follows the new leader (see `wait_replica`)."""
        node = self.node(name)
        if node.alive:
            raise RuntimeError(f"{name} is running")
        self._start_agent(node)
        self.wait_replica(node, timeout)
        node.killed_at = None

    def freeze_replication(self) -> int:
        """Stop (SIGSTOP) the replica's WAL receiver: the leader's WAL no longer reaches it,
        and in synchronous mode a commit waits for it. Returns its pid for `thaw_replication`
        (thaw within `wal_sender_timeout`, 5 min here, or the leader drops the replica)."""
        with psycopg.connect(self.replica().dsn(), autocommit=True) as conn:
            row = conn.execute("SELECT pid FROM pg_stat_wal_receiver").fetchone()
        if row is None or row[0] is None:
            raise RuntimeError("the replica has no WAL receiver")
        os.kill(int(row[0]), signal.SIGSTOP)
        return int(row[0])

    @staticmethod
    def thaw_replication(pid: int) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGCONT)

    def set_synchronous(self, on: bool, timeout: float = 60) -> None:
        """Switch Patroni's `synchronous_mode` (its dynamic configuration in the DCS) and wait
        until the replica is (or is no longer) the synchronous standby."""
        leader = self.leader()
        if leader is None:
            raise RuntimeError("the cluster has no leader")
        request = urllib.request.Request(
            f"http://127.0.0.1:{leader.rest_port}/config",
            data=json.dumps({"synchronous_mode": on}).encode(),
            method="PATCH",
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=10) as reply:
            assert reply.status == 200, reply.read()
        self.synchronous = on
        replica = self.replica()
        want = 200 if on else 503

        def switched() -> bool:
            return replica.rest("/sync")[0] == want and self._sync_names(leader) == on

        self._wait(switched, timeout, f"synchronous_mode {on}")

    @staticmethod
    def _sync_names(leader: Node) -> bool:
        """Whether the leader's synchronous_standby_names is set (commits wait for a standby)."""
        with psycopg.connect(leader.dsn(), connect_timeout=2, autocommit=True) as conn:
            row = conn.execute("SHOW synchronous_standby_names").fetchone()
        return bool(row and row[0])

    def ensure_healthy(self, timeout: float = 240) -> None:
        """Both nodes up (a killed one rejoins as a replica), the replica streaming (and, in
        synchronous mode, the synchronous standby)."""
        for node in self.nodes:
            if not node.alive:
                self.rejoin(node.name, timeout)
        self._wait(lambda: self.leader() is not None, timeout, "a leader")
        alive = [n for n in self.nodes if n.alive]
        self._wait(lambda: any(n.rest("/replica")[0] == 200 for n in alive), timeout, "a replica")
        self.wait_replica(self.replica(), timeout)

    def logs(self) -> str:
        parts = [f"--- {n.name}\n{_tail(n.log)}" for n in self.nodes]
        parts.append(f"--- callbacks\n{_tail(self.callback_log)}")
        if self.bouncer is not None:
            parts.append(f"--- pgbouncer\n{self.bouncer.log()}")
        return "\n".join(parts)

    # -- teardown ------------------------------------------------------------------------------
    def stop(self) -> None:
        for node in self.nodes:
            if node.alive or _exists(node.postmaster_pid()):
                with contextlib.suppress(Exception):
                    self._kill_node(node)
            _drop_shared_memory(node.data_dir)
        if self.etcd is not None and self.etcd.poll() is None:
            self.etcd.kill()
            self.etcd.wait(30)
        if self.bouncer is not None:
            self.bouncer.stop()
        shutil.rmtree(self.base, ignore_errors=True)

    def __enter__(self) -> PatroniCluster:
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


def _service_user() -> pwd.struct_passwd | None:
    """The account the children run as when we are root (created if missing)."""
    return servers._service_user(create=True) if os.geteuid() == 0 else None


def _replication(leader: Node | None) -> list[str]:
    """Application names of the leader's walsenders that are streaming."""
    if leader is None:
        return []
    with contextlib.suppress(psycopg.Error):
        with psycopg.connect(leader.dsn(), connect_timeout=2, autocommit=True) as conn:
            rows = conn.execute(
                "SELECT application_name FROM pg_stat_replication WHERE state = 'streaming'"
            ).fetchall()
        return [str(r[0]) for r in rows]
    return []


def _tree(root: int) -> list[int]:
    """`root` and its descendants (from /proc)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError, ValueError, IndexError):
            stat = (entry / "stat").read_text()
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            children.setdefault(ppid, []).append(int(entry.name))
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo += children.get(pid, [])
    return out


def _exists(pid: int | None) -> bool:
    if pid is None:
        return False
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def _drop_shared_memory(data_dir: Path) -> None:
    """Remove the SysV segment a SIGKILLed postmaster left (its id is in postmaster.pid)."""
    with contextlib.suppress(OSError, IndexError, ValueError):
        lines = (data_dir / "postmaster.pid").read_text().splitlines()
        shmid = lines[6].split()[1]
        subprocess.run(["ipcrm", "-m", shmid], capture_output=True, check=False)


def _tail(path: Path, size: int = 3000) -> str:
    return path.read_text(errors="replace")[-size:] if path.exists() else ""
