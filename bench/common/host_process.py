"""The parent's handle on a chaos host: one host id, run as successive processes."""

from __future__ import annotations

import signal
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path

from bench.common.commands import ROOT, module_argv
from bench.common.host import HostConfig


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
        args = module_argv("bench.common.host", self.cfg.to_json())
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=err, cwd=ROOT)
        err.close()

    def wait_ready(self, timeout: float = 60.0) -> None:
        self.wait_logged("ready", timeout)

    def wait_logged(self, event: str, timeout: float = 60.0) -> None:
        """Until the running incarnation logged `event` (e.g. `ready`, `producers-stopped`)."""
        log = Path(self.cfg.folder) / f"{self.cfg.host}.{self.cfg.incarnation}.log"
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise AssertionError(f"host {self.cfg.host} died: {self.stderr()}")
            if log.exists() and f'"e":"{event}"' in log.read_text():
                return
            time.sleep(0.05)
        raise AssertionError(f"host {self.cfg.host} did not log {event} after {timeout}s")

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


def reap(procs: Sequence[HostProcess]) -> None:
    """Kill whatever host process is still running (a failed run must not leave any)."""
    for p in procs:
        if p.proc is not None and p.proc.poll() is None:
            p.proc.kill()
            p.proc.wait()
