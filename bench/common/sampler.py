"""A thread that samples until stopped: the benches' lock, CPU and disk samplers. A subclass
calls `super().__init__()` and defines `_run`, which loops until `self._stop` is set."""

from __future__ import annotations

import threading


class Sampler:
    def __init__(self) -> None:
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=30)

    def _run(self) -> None:
        raise NotImplementedError
