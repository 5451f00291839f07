"""`fleet upgrade`: one runner of a run. Workers claim targets from the control database
(the waves' caps counted there, so any number of runners on any machines share the work),
upgrade each as `upgrade` does (`fleet.apply`), and record its end under the claim's fence;
a heartbeat renews the leases. A runner with nothing to claim while others hold targets
waits, taking over leases that expire, so every runner ends with the run's exit code.

Faults, as `docs/fleet.md` tells them: a target's failure follows its wave's `on_error`
(stop: nothing more is claimed in this or any later wave, the unclaimed targets are
skipped, those in flight finish the revision they are in); a lease this runner cannot renew
cancels that target's statement and records nothing more for it; SIGTERM or SIGINT claims
nothing more, lets the revision in flight finish for `stop_grace_s`, then cancels it, and
puts every target it held back to pending (the next run goes on from there)."""

from __future__ import annotations

import signal
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from queueguard.engine.apply.session import Limits
from queueguard.errors import RunnerBusy
from queueguard.fleet import apply, survey
from queueguard.fleet.alembic_worker import Worker
from queueguard.fleet.control import Claim, Control, StaleFence
from queueguard.fleet.events import Events
from queueguard.fleet.online import Online
from queueguard.fleet.targets import Target, Wave
from queueguard.sets import MigrationSet


@dataclass
class Options:
    to: str | None = None
    limits: Limits = field(default_factory=Limits)
    claim_ttl_s: float = 30.0
    stop_grace_s: float = 20.0
    poll_s: float = 0.25
    #: the lock budget fleet plan checks every target against before the run (None: none)
    max_lock_ms: float | None = None
    scratch_admin: str | None = None
    #: `--online`: the over-budget statements in online forms, prepared once per group
    online: Online | None = None


@dataclass
class Runner:
    control: Control
    run: int
    runner: str
    mset: MigrationSet
    #: this runner's own resolution of the targets file (credentials included), by name
    targets: dict[str, Target]
    waves: list[Wave]
    options: Options
    events: Events
    say: Callable[[str], None] = field(default=lambda line: print(line, file=sys.stderr))
    stopping: threading.Event = field(default_factory=threading.Event)
    signalled: str | None = None
    flights: dict[str, tuple[Claim, apply.Flight, float]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    #: each worker thread's Alembic worker process
    _workers: dict[int, Worker] = field(default_factory=dict)

    # --- the run -----------------------------------------------------------------------------
    def go(self) -> None:
        manifest = self.control.manifest(self.run)
        self.wave_of = {name: wave for name, wave, _ in manifest}
        self.caps = survey.caps(
            self.mset.format,
            [self.targets[n] for n, w, _ in manifest if w is not None and n in self.targets],
        )
        self.prefilter([n for n, w, s in manifest if s == "pending"])
        if self.options.online is not None:
            waiting = [self.targets[n] for n, _, s in self.control.manifest(self.run)
                       if s in ("pending", "running") and n in self.targets]  # fmt: skip
            self.options.online.group(waiting)
        done = threading.Event()
        beat = threading.Thread(target=self._beat, args=(done,), daemon=True, name="heartbeat")
        beat.start()
        n = max(w.parallel for w in self.waves)
        if self.mset.format in apply.ONE_AT_A_TIME and self.options.online is not None:
            n = 1  # Alembic's context is one per process: in this one, one at a time
        workers = [
            threading.Thread(target=self._work, daemon=True, name=f"worker-{i}") for i in range(n)
        ]
        restore = self._signals()
        try:
            for w in workers:
                w.start()
            self._wait(workers)
        finally:
            done.set()
            restore()
        beat.join(5)
        self.control.skip_stopped(self.run)
        self.control.finish(self.run)

    def _wait(self, workers: list[threading.Thread]) -> None:
        """Until the workers end; after a signal, `stop_grace_s` for the revisions in flight,
        then their statements cancelled."""
        deadline: float | None = None
        while any(w.is_alive() for w in workers):
            if self.stopping.is_set() and deadline is None:
                deadline = time.monotonic() + self.options.stop_grace_s
            if deadline is not None and time.monotonic() >= deadline:
                # again every round: a cancel that lands between two statements cancels
                # nothing, and the revision would run on
                for _, flight, _ in list(self.flights.values()):
                    flight.cancel()
            time.sleep(0.2)

    def _signals(self) -> Callable[[], None]:
        if threading.current_thread() is not threading.main_thread():
            return lambda: None

        def stop(signum: int, _frame: object) -> None:
            self.signalled = signal.Signals(signum).name
            self.say(
                f"fleet: {self.signalled}: claiming nothing more; the revisions in flight get "
                f"{self.options.stop_grace_s:g} s to finish"
            )
            self.stopping.set()
            for _, flight, _ in list(self.flights.values()):
                flight.stop_between.set()

        before = {s: signal.signal(s, stop) for s in (signal.SIGTERM, signal.SIGINT)}

        def restore() -> None:
            for s, handler in before.items():
                signal.signal(s, handler)

        return restore

    # --- before any claim: targets already there ---------------------------------------------
    def prefilter(self, names: list[str]) -> None:
        """Targets at the target revision are recorded done without a claim (each database
        read on one connection, every schema of it on that connection); targets past it are
        skipped. A target that cannot be read is left to its claim, which records why."""
        target = self.mset.resolve(self.options.to)
        at_target = []
        known = [self.targets[n] for n in names if n in self.targets]
        for t, at in survey.revisions(self.mset, known):
            if self.mset.at_head(at, self.options.to):
                at_target.append(t.name)
            elif at is not None and self._past(at, target):
                why = f"at {at}, past the target revision {target}"
                if self.control.skipped_unclaimed(self.run, t.name, at, why):
                    self._event(t.name, "skipped", None, at, why)
        for name in self.control.done_unclaimed(self.run, at_target, target):
            self._event(name, "done", None, target, None)

    def _past(self, at: str, target: str | None) -> bool:
        """Whether a target is past the target revision (one line of revisions only: on a
        set that branches, another branch's revision is not "past"; its claim upgrades it
        as Alembic would, or says why not)."""
        ids = self.mset.ids
        if target is None or at not in ids or target not in ids or self.mset.steps is not None:
            return False
        return ids.index(at) > ids.index(target)

    # --- workers -----------------------------------------------------------------------------
    def _work(self) -> None:
        control: Control | None = None
        try:
            while not self.stopping.is_set():
                try:
                    if control is None:
                        control = self.control.twin()
                    if not self._turn(control):
                        return
                except Exception as exc:  # the control database out of reach, past its retries
                    self.say(f"fleet: worker: {apply.failure(exc)}; trying again")
                    if control is not None:
                        control.close()
                    control = None
                    self.stopping.wait(self.options.claim_ttl_s / 3)
        finally:
            if control is not None:
                control.close()
            worker = self._workers.pop(threading.get_ident(), None)
            if worker is not None:
                worker.close()

    def _worker(self) -> Worker | None:
        """This thread's Alembic worker process (Alembic sets, not --online), started on its
        first target and again after a cancelled one ended it."""
        if self.mset.format not in apply.ONE_AT_A_TIME or self.options.online is not None:
            return None
        me = threading.get_ident()
        worker = self._workers.get(me)
        if worker is None or not worker.alive:
            worker = self._workers[me] = Worker(self.mset.root, self.mset.format)
        return worker

    def _turn(self, control: Control) -> bool:
        """One claim worked, or a wait for one; False when the run has nothing left."""
        claim = control.claim(self.run, self.runner, self.options.claim_ttl_s, self.caps)
        if claim is not None:
            self._one(control, claim)
            return True
        pending, running, finished, stopped = control.live(self.run)
        if stopped is not None and control.skip_stopped(self.run):
            pending, running, finished, stopped = control.live(self.run)
        if finished or (pending == 0 and running == 0):
            return False
        self.stopping.wait(self.options.poll_s)
        return True

    def _one(self, control: Control, claim: Claim) -> None:
        name = claim.name
        target = self.targets.get(name)
        began = time.monotonic()
        if target is None:
            self._failed(control, claim, "not in this runner's targets file", began)
            return
        refused = apply.refusal(self.mset, target) or claim.refusal
        if refused:
            self._failed(control, claim, refused, began)
            return
        flight = apply.Flight(target)
        if self.stopping.is_set():
            flight.stop_between.set()
        with self._lock:
            self.flights[name] = (claim, flight, time.monotonic())
        how = "taken over (its lease expired)" if claim.takeover else "claimed"
        self._event(name, "running", claim.fence, None, None, note=how)
        try:
            outcome = apply.upgrade(
                self.mset, flight, self.options.to, self.options.limits,
                self.options.online, self._worker(),
            )  # fmt: skip
        except RunnerBusy as exc:
            self._record(control, claim, "pending", None, apply.failure(exc), began)
        except Exception as exc:  # a target's failure is recorded, not raised
            if flight.lost.is_set():
                self.say(f"fleet: {name}: lease lost; its statement was cancelled")
            elif self.signalled:
                why = f"interrupted by {self.signalled}: {apply.failure(exc)}"
                self._record(control, claim, "pending", None, why, began)
            else:
                self._failed(control, claim, apply.failure(exc), began)
        else:
            if flight.lost.is_set():
                self.say(f"fleet: {name}: lease lost; nothing more recorded for it")
            elif outcome.stopped:
                at = outcome.after or "nothing applied"
                if self.signalled:  # the run goes on with a rerun: pending
                    why, state = f"stopped at {at} by {self.signalled}", "pending"
                else:  # the run stopped: it claims this target no more
                    why, state = f"stopped at {at}: the run stopped", "skipped"
                self._record(control, claim, state, outcome.after, why, began,
                             outcome.lock_waits)  # fmt: skip
            else:
                self._record(control, claim, "done", outcome.after, None, began,
                             outcome.lock_waits)  # fmt: skip
        finally:
            with self._lock:
                self.flights.pop(name, None)

    def _failed(self, control: Control, claim: Claim, error: str, began: float) -> None:
        self._record(control, claim, "failed", None, error, began)
        index = self.wave_of.get(claim.name)
        if index is None:
            return
        wave = self.waves[index]
        if wave.on_error == "stop":
            reason = f"wave {wave.name}: {claim.name} failed (on_error = stop)"
        elif (
            wave.max_failures is not None and control.failures(self.run, index) > wave.max_failures
        ):
            reason = f"wave {wave.name}: more than {wave.max_failures} targets failed"
        else:
            return
        control.stop(self.run, reason)
        self.say(f"fleet: run stopped: {reason}")
        for _, flight, _ in list(self.flights.values()):
            flight.stop_between.set()

    def _record(
        self,
        control: Control,
        claim: Claim,
        state: str,
        revision: str | None,
        error: str | None,
        began: float,
        lock_waits: int = 0,
    ) -> None:
        elapsed = int((time.monotonic() - began) * 1000)
        try:
            control.record(
                self.run, claim, state, revision=revision, error=error, elapsed_ms=elapsed,
                lock_waits=lock_waits,
            )  # fmt: skip
        except StaleFence as exc:
            self.say(f"fleet: {exc}")
            return
        self._event(claim.name, state, claim.fence, revision, error)

    # --- leases --------------------------------------------------------------------------------
    def _beat(self, done: threading.Event) -> None:
        """Every third of the TTL: this runner said alive, the run's stop passed on to the
        targets in flight (they stop after their revision), and each lease renewed; a lease
        that cannot be renewed (its fence raised, or expired while the control database was
        out of reach) cancels its target's statement."""
        ttl = self.options.claim_ttl_s
        control: Control | None = None
        while not done.wait(ttl / 3):
            try:
                if control is None:
                    control = self.control.twin()
                if control.alive(self.run, ttl) is not None:
                    for _, flight, _ in list(self.flights.values()):
                        flight.stop_between.set()
            except Exception:  # the control database out of reach: the leases decide
                if control is not None:
                    control.close()
                control = None
            for name, (claim, flight, renewed) in list(self.flights.items()):
                try:
                    if control is None:
                        control = self.control.twin()
                    ok = control.renew(self.run, claim, ttl)
                except Exception:  # the control database out of reach
                    if control is not None:
                        control.close()
                    control = None
                    ok = time.monotonic() - renewed < ttl * 0.8
                else:
                    if ok:
                        with self._lock:
                            now = self.flights.get(name)
                            if now is not None and now[0] is claim:  # not a later claim's
                                self.flights[name] = (claim, flight, time.monotonic())
                if (
                    not ok
                    and not flight.lost.is_set()
                    and self.flights.get(name, (None,))[0] is claim
                ):
                    flight.lost.set()
                    flight.cancel()
                    self.say(f"fleet: {name}: lease lost (fence {claim.fence}); cancelling it")
        if control is not None:
            control.close()

    def _event(
        self,
        name: str,
        state: str,
        fence: int | None,
        revision: str | None,
        error: str | None,
        note: str | None = None,
    ) -> None:
        index = self.wave_of.get(name)
        wave = self.waves[index].name if index is not None else None
        self.events.emit(self.run, self.runner, name, wave, state, fence, revision, error, note)


def exit_code(rows: list[tuple[Any, ...]]) -> int:
    """0 when every target of the run's manifest is done; 1 otherwise."""
    states = [r[3] for r in rows if r[3] != "not in this run"]
    return 0 if states and all(s == "done" for s in states) else 1
