"""The "## Online upgrade" section of docs/benchmarks.md, from one run of bench.online."""

from __future__ import annotations

import os
import platform

from bench.common.commands import shown
from bench.online.gaps import Gaps
from bench.online.measure import CommandRun
from bench.online.results import Results, Settings

GOAL_S = 1.0


def _s(value: float) -> str:
    return f"{value * 1000:.0f} ms" if value < 1 else f"{value:.2f} s"


def _mib(value: float) -> str:
    return f"{value / 2**20:,.1f} MiB"


def command(settings: Settings) -> str:
    """The command that reproduces the run: non-default settings spelled out."""
    defaults = Settings()
    args = ["--rows", str(settings.rows), "--queues", str(settings.queues)]
    if settings.hosts != defaults.hosts:
        args += ["--hosts", str(settings.hosts)]
    if settings.batch_size != defaults.batch_size:
        args += ["--batch-size", str(settings.batch_size)]
    if settings.baseline_s != defaults.baseline_s:
        args += ["--baseline", f"{settings.baseline_s:g}"]
    return shown("bench.online", *args)


def _gap_row(label: str, gaps: Gaps) -> str:
    silent = f" ({gaps.silent} queues silent)" if gaps.silent else ""
    return (
        f"| {label} | {_s(gaps.window_s)} | {_s(gaps.p50_s)} | {_s(gaps.p99_s)} "
        f"| **{_s(gaps.max_s)}**{silent} |"
    )


def _own_wal(run: CommandRun) -> str:
    return _mib(run.own_wal_bytes) if run.own_wal_bytes else "not captured"


def _phase_row(label: str, run: CommandRun, rows: str) -> str:
    report = run.report
    return (
        f"| {label} | {run.wall_s:.2f} s | {int(report.get('batches', 0)):,} "
        f"| {report.get('lock_waits', 0)} | {rows} | {_own_wal(run)} "
        f"| {_mib(run.wal_bytes)} | {run.peak_rss_mb:.1f} MiB |"
    )


def _moved(run: CommandRun) -> tuple[int, int]:
    relocated = sum(int(n) for n in run.report.get("relocated", {}).values())
    return relocated, int(run.report.get("directives", 0))


def render(results: Results, compare: Results | None = None) -> str:
    """The section for `results`; `compare`, a second run (e.g. another --batch-size), adds
    its online rows beside them."""
    s, g = results.settings, results.gaps
    expand, migrate, contract = (results.phases[p] for p in ("expand", "migrate", "contract"))
    relocated, directives = _moved(migrate)
    late_relocated, late_directives = _moved(contract)
    rate = (relocated + directives) / migrate.wall_s
    online_max = g["online"].max_s
    met = "met" if online_max < GOAL_S else "**not met**"
    load = (
        f"1-minute load average {results.load[0]:.1f} at the start, {results.load[1]:.1f} at "
        "the end: the machine and the server were shared with other work"
        if results.load
        else "the machine and the server were shared with other work"
    )
    lines = [
        "## Online upgrade",
        "",
        f"Command: `{command(s)}` ({results.measured_on}; {results.server} (embedded); "
        f"{os.cpu_count()} CPUs, Python {platform.python_version()}; {load})."
        + (_compared(compare) if compare is not None else ""),
        "",
        f"The database: revision 003 with {s.rows:,} legacy task rows over {s.queues} default "
        f"queues and their {s.queues} legacy `@auto` siblings (half the rows in each kind), "
        "History for 90 % of the runs, a stale counter on every third queue "
        "(`bench/common/v3_database.py`); cloned once per side. The fleet: "
        f"{s.hosts} v0.4 hosts in one process (`PostgresStore` + `Matching`, checkpoints "
        "every 1,000 acks or 50 ms, pages of 100 rows), each owning a disjoint share of the "
        "default queues (no host fences another): "
        f"one thread per queue polls it once every {s.period_s * 1000:.0f} ms "
        f"(`Matching.poll`), one per host adds tasks (`add_task`, {s.produce_per_s:.0f}/s for the "
        "whole fleet, each with a run History knows). Every default queue holds a backlog "
        "throughout, so a queue whose host can reach it dispatches every period.",
        "",
        "- **online**: `upgrade --online --phase expand`, then the fleet starts, runs a "
        f"{s.baseline_s:.0f} s baseline, then `--phase migrate` and `--phase contract` run "
        "while it dispatches (each phase a process of its own);",
        "- **offline**: on the other clone, `queueguard upgrade --force` (one transaction "
        "holding ACCESS EXCLUSIVE on `task_queues` and `tasks`); the fleet's clients start "
        "with it and retry every 50 ms until the database is at 004 (a v0.4 host cannot start "
        "against 003 without a rollout), then dispatch as above.",
        "",
        "Dispatch gaps, per queue: the longest time between two consecutive dispatches of the "
        "queue that overlaps the window; p50, p99 and max across the queues:",
        "",
        "| window | length | p50 | p99 | max |",
        "|---|---:|---:|---:|---:|",
        _gap_row("baseline: fleet running, no upgrade work", g["baseline"]),
        _gap_row("**online**: migrate + contract", g["online"]),
        _gap_row("… migrate alone", g["migrate"]),
        _gap_row("… contract alone", g["contract"]),
        _gap_row(
            "**offline** upgrade (from its start to each queue's first dispatch)", g["offline"]
        ),
        *(_compare_gaps(compare) if compare is not None else []),
        "",
        f"Goal: online max gap < {_s(GOAL_S)}: {met} ({_s(online_max)}; offline "
        f"{_s(g['offline'].max_s)}).",
        "",
        "Rollout, phase by phase, each phase one `queueguard upgrade … --json` process. "
        "WAL, two ways: the process's own backend (`pg_stat_get_backend_wal`, sampled every "
        "25 ms: a lower bound, as a backend publishes it when idle and at most once a second, "
        "so the last second may be missing, and a short command's may never be seen) and "
        "the server's (`pg_wal_lsn_diff` of `pg_current_wal_lsn()` around the process: an "
        "upper bound, it includes what the fleet and other databases on the server wrote "
        f"meanwhile, {_mib(results.fleet_wal_per_s)}/s in the baseline window). Peak RSS: "
        "the process's VmHWM, sampled every 10 ms.",
        "",
        "| phase | wall | batches | lock waits | rows | WAL, own | WAL, server | peak RSS |",
        "|---|---:|---:|---:|---|---:|---:|---:|",
        _phase_row("expand", expand, "—"),
        _phase_row(
            "migrate",
            migrate,
            f"{relocated:,} relocated + {directives:,} directives: **{rate:,.0f} rows/s**",
        ),
        _phase_row(
            "contract",
            contract,
            f"{late_relocated:,} relocated + {late_directives:,} directives (rows hosts wrote "
            f"after migrate passed); {contract.report.get('queues_fenced', 0)} queues fenced",
        ),
    ]
    if compare is not None:
        other = compare.phases["migrate"]
        moved, stamped = _moved(other)
        lines.append(
            _phase_row(
                f"migrate, `--batch-size {compare.settings.batch_size}` (second run)",
                other,
                f"{moved:,} relocated + {stamped:,} directives: "
                f"{(moved + stamped) / other.wall_s:,.0f} rows/s",
            )
        )
    if results.offline is not None:
        off = results.offline
        lines.append(
            f"| offline `upgrade` (no fleet writing) | {off.wall_s:.2f} s | 1 transaction "
            f"| {off.report.get('lock_waits', 0)} | all | {_own_wal(off)} "
            f"| {_mib(off.wal_bytes)} | {off.peak_rss_mb:.1f} MiB |"
        )
    lines += _handover(results) + _counts(results) + _notes(results)
    lines += _findings(results, compare)
    return "\n".join(lines) + "\n"


def _compared(compare: Results) -> str:
    load = (
        f"; load average {compare.load[0]:.1f} at the start, {compare.load[1]:.1f} at the end"
        if compare.load
        else ""
    )
    return (
        f" The rows marked *second run* come from `{command(compare.settings)} --no-docs` "
        f"({compare.measured_on}{load}), the same benchmark with another batch size."
    )


def _compare_gaps(compare: Results) -> list[str]:
    size = compare.settings.batch_size
    return [
        _gap_row("*second run*: baseline", compare.gaps["baseline"]),
        _gap_row(f"*second run*: online, `--batch-size {size}`", compare.gaps["online"]),
    ]


def _handover(results: Results) -> list[str]:
    h = results.handover
    if h is None:
        return ["", "Handover (b): did not finish; see the run's output."]
    return [
        "",
        "Handover (b), during migrate on its own queue: a v0.3 host (`V03Worker`) adds and "
        "dispatches every 20 ms; after 2 s a v0.4 host (`Matching`) starts on the same queue "
        "while the v0.3 one still runs:",
        "",
        "| measure | result |",
        "|---|---|",
        f"| longest dispatch gap of the queue, v0.4 start → v0.3 out | **{_s(h.gap_s)}** |",
        f"| last v0.3 dispatch → next v0.4 dispatch | {_s(h.v03_last_to_v04_first_s)} |",
        f"| v0.4 start → the v0.3 host's refused write | {_s(h.v03_out_after_s)} |",
        f"| what refused it | `{h.v03_failure}` |",
        f"| its reload | `{h.v03_reload}` |",
        f"| tasks added / dispatched (v0.3, v0.4) / started in History | {h.added} / "
        f"{h.delivered} ({h.dispatched.get('v0.3', 0)}, {h.dispatched.get('v0.4', 0)}) / "
        f"{h.started}; {h.duplicates} duplicates, {h.lost} lost, {h.unexpected} unexpected |",
    ]


def _counts(results: Results) -> list[str]:
    c = results.counts
    if c is None:
        return []
    return [
        "",
        "Count check, online (after contract the fleet drained every queue: "
        f"{results.drain_s:.0f} s):",
        "",
        "| | added | dispatched | started in History | duplicates | lost |",
        "|---|---:|---:|---:|---:|---:|",
        f"| fleet tasks | {c.added:,} | {c.delivered:,} | {c.started:,} | {c.duplicates} "
        f"| {c.lost} (and {c.unexpected} started but never added) |",
        f"| legacy rows with History | {c.legacy_with_history:,} | {c.legacy_delivered:,} "
        f"| {c.legacy_started:,} | — | {c.legacy_with_history - c.legacy_started} |",
        "",
        f"Task rows left in the database: {c.rows_left}. Check: "
        + ("**passed**." if c.ok else "**FAILED**."),
    ]


def _findings(results: Results, compare: Results | None) -> list[str]:
    """What the figures say beyond the tables, from the runs' numbers."""
    found: list[str] = []
    migrate, offline = results.phases["migrate"], results.offline
    online_max = results.gaps["online"].max_s
    if online_max >= GOAL_S:
        found.append(
            f"- The online gaps exceed the baseline's ({_s(online_max)} against "
            f"{_s(results.gaps['baseline'].max_s)}). What each fleet thread waited on is not "
            "instrumented here. By their SQL, a relocation batch holds the destination queue's "
            "`task_queues` row lock, and a directive batch `FOR UPDATE` locks on up to "
            f"`--batch-size` ({results.settings.batch_size:,}) task rows, until the batch "
            "commits; a host's checkpoint of that queue waits for it, and the checkpoint runs "
            "in the polling thread when due. A batch's duration, hence the wait, grows with "
            "`--batch-size` and with the load of the machine."
        )
        if compare is not None:
            other = compare.gaps["online"]
            found[-1] += (
                f" The second run, at `--batch-size {compare.settings.batch_size}`, had "
                f"p99 {_s(other.p99_s)} and max {_s(other.max_s)} (its baseline max "
                f"{_s(compare.gaps['baseline'].max_s)}); migrate took "
                f"{compare.phases['migrate'].wall_s:.0f} s in "
                f"{compare.phases['migrate'].report.get('batches', 0):,} batches. The two runs "
                "met different loads, so this is an indication, not a controlled comparison."
            )
    if offline is not None and migrate.own_wal_bytes and offline.own_wal_bytes:
        ratio = migrate.own_wal_bytes / offline.own_wal_bytes
        found.append(
            f"- migrate's own WAL was {ratio:.1f}× the offline upgrade's "
            f"({_mib(migrate.own_wal_bytes)} against {_mib(offline.own_wal_bytes)}), over "
            f"{migrate.report.get('batches', 0):,} batch transactions and a run "
            f"{migrate.wall_s / offline.wall_s:.1f}× as long (more checkpoints, so more "
            "full-page images, may account for part of it; that split is not analysed here). "
            "Size WAL archiving and replicas for the online figure."
        )
    return found


def _notes(results: Results) -> list[str]:
    errors = results.fleet_errors
    unique = sum(v["count"] for k, v in errors.items() if "UniqueViolation" in k)
    other = {k: v for k, v in errors.items() if "UniqueViolation" not in k and "retried" not in k}
    notes = [
        "",
        "Notes:",
        "",
        "- Every figure here was measured by this benchmark on this machine, in the run(s) "
        "named above; no other project's figures are quoted. Two cores serve PostgreSQL, "
        "the migrator, the fleet and whatever else runs, so gaps follow CPU contention as "
        "much as locks: read the online rows against the baseline row of the same run.",
        "- The baseline is what the fleet's own loop costs: each queue is polled once per "
        "period, so its gaps sit near the period whatever the upgrade does.",
        "- The offline gap is counted from the moment the upgrade starts, as if the v0.3 "
        "fleet dispatched until then and stopped instantly: stopping and restarting a real "
        "fleet adds its own time, so the offline figures are a lower bound.",
        "- What is not measured in (a): the expand phase runs before the v0.4 fleet exists "
        "(v0.3 hosts would be serving then); its effect on them is not measured here.",
    ]
    if unique:
        notes.append(
            f"- {unique:,} `add_task` calls failed with a duplicate task id before migrate "
            "repaired the stale counters: a legacy counter below the highest stored id makes "
            "the next append collide, for v0.3 and v0.4 hosts alike (nothing is stored; the "
            "fleet counts the task as not added). Offline 004 repairs the counters before any "
            "v0.4 host can start; online, migrate's first step does."
        )
    if other:
        listed = "; ".join(f"{k} ×{v['count']} (`{v['first']}`)" for k, v in other.items())
        notes.append(f"- Other fleet errors: {listed}.")
    return notes
