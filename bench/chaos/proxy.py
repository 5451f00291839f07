"""A TCP proxy in front of a private server that cuts a connection right after the commit.

It understands just enough of the PostgreSQL wire protocol to see which statements a Sync
(extended protocol) or a simple Query commits. Armed with a predicate and a mode, it cuts
the next connection that commits a matching statement:

- `reply-lost`: the commit message is forwarded (the server commits), the answer dropped;
- `request-lost`: the message is dropped (the server rolls back).

The client sees the same broken connection either way: the outcome is unknown to it.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from bench.common.databases import query

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
        cut = self.try_cut(timeout)
        if cut is None:
            raise AssertionError("the armed proxy cut nothing")
        return cut

    def try_cut(self, timeout: float) -> Cut | None:
        """The cut the armed proxy made, or None (and disarmed) when no matching commit came
        within `timeout`: under a loaded machine the armed statement may simply not run."""
        if self._cut_event.wait(timeout):
            with self._lock:
                return self.cuts[-1]
        with self._lock:
            if self._cut_event.is_set():  # cut just after the wait gave up
                return self.cuts[-1]
            self._armed = None
        return None

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
