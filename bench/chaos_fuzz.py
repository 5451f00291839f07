"""Chaos scenario 7: hostile input (hypothesis).

Targets and their property — every input is either accepted correctly or rejected with a
typed error (a `QueueguardError`), and a rejection writes nothing:

- queue-key decoder (pure): any text, and mutations of valid keys (lowercase or needless
  escapes, leading zeros, empty `@`, stray separators…): decode either returns components
  that encode back to the very same key, or raises InvalidQueueKey;
- snapshot validation (pure): arbitrary JSON, raw bytes, valid format-3/4 documents built
  from hostile names, and mutations of them and of the golden snapshot: `snapshot.parse`
  either returns a document that imports into the memory store and re-exports to itself, or
  raises SnapshotError;
- snapshot importer (database): every document the validator accepts loads into an empty
  head database (the CLI's `snapshot import` path) and exports back equal; the load runs in a
  transaction that is rolled back, so a failure would leave nothing behind (checked);
- SQL injection (database): namespaces, task queue names, versions, workflow ids and user
  data built from injection strings round-trip as data through the runtime (load, append,
  read, checkpoint, user data CAS) and `inspect`; the schema is intact afterwards;
- fixture loading (CLI, database): `fixtures load NAME` with hostile names against empty,
  loaded and foreign databases: loads a shipped fixture into an empty database, or refuses
  (exit 1/2) and changes nothing;
- CLI arguments: random command lines (hostile durations, revisions, counts, DSNs, paths):
  exit 0, 1 or 2, never a traceback, and a database that a failed command touched is unchanged.

    /work/venv/bin/python bench/chaos_fuzz.py              # 2,000 / 200 examples, writes docs
    /work/venv/bin/python bench/chaos_fuzz.py --pure 200 --db 50 --cli 20 --no-docs
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import io
import json
import os
import shutil
import subprocess
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC
from pathlib import Path
from typing import Any

import _chaos
from _chaos import say
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from queueguard import cli, snapshot
from queueguard.core.keys import MAX_PARTITION, PhysicalQueue, decode, legacy_queue
from queueguard.core.store import Execution
from queueguard.errors import InvalidQueueKey, QueueguardError, SnapshotError
from queueguard.pg.connect import connect
from queueguard.resources import fixtures_dir
from queueguard.upgrade import golden, state

CI_TEST = (
    "`tests/test_reliability_fuzz.py` (1,000 examples per pure target, 100 per database and "
    "in-process CLI target, 20 spawned CLI runs) + regressions of what it found"
)
QUEUEGUARD = str(Path(_chaos.PYTHON).with_name("queueguard"))

# --- hostile names ----------------------------------------------------------------------------
INJECTIONS = [
    "'; DROP TABLE tasks; --",
    '"; DROP TABLE task_queues; --',
    "x' OR '1'='1",
    "$$; DROP TABLE executions; $$",
    "Robert'); DROP TABLE scheduled_tasks;--",
    "%s",
    "%(key)s",
    "{0}{key}",
    "\\'\\\\",
    "/* */ -- ",
    "a/b@c%2Fd",
    "@auto",
    "ns/../../etc",
    "\u202eevil",
    "😈 ünïcødé",
    "E'\\x00'",
    "'||pg_sleep(5)||'",
    "\t\n\r",
    "; COPY tasks TO PROGRAM 'id'; --",
]


def storable(text: str) -> bool:
    """What PostgreSQL text can hold: UTF-8 without NUL (no lone surrogates)."""
    if "\x00" in text:
        return False
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


names = st.one_of(
    st.sampled_from(INJECTIONS),
    st.text(min_size=1, max_size=24).filter(storable),
    st.tuples(st.sampled_from(INJECTIONS), st.text(max_size=8)).map("".join).filter(storable),
)
versions = st.one_of(
    st.just(""),
    names.map(lambda n: n if "." in n else n + ".build-1").filter(lambda v: v != "auto"),
)
components = st.tuples(
    names, names, st.sampled_from(["workflow", "activity"]), st.integers(0, MAX_PARTITION), versions
)


def queue_of(c: tuple[str, str, str, int, str]) -> PhysicalQueue:
    return PhysicalQueue(*c)


# --- target: the queue-key decoder ------------------------------------------------------------
def check_key(key: str) -> str:
    try:
        decoded = decode(key, allow_auto=True)
    except InvalidQueueKey:
        return "rejected"
    encoded = decoded.key if isinstance(decoded, PhysicalQueue) else legacy_queue(*decoded)
    assert encoded == key, (key, encoded)
    return "accepted"


KEY_NOISE = ["%2f", "%2F", "%41", "%", "%G1", "%C3", "%c3%a9", "/", "@", "@@", "0", "+", " ", "~"]


@st.composite
def mutated_keys(draw: st.DrawFn) -> str:
    key = queue_of(draw(components)).key
    if draw(st.booleans()) and "@" not in key:
        key += "@auto"
    for _ in range(draw(st.integers(0, 3))):
        op = draw(st.sampled_from(["insert", "delete", "replace", "lower", "zero", "at"]))
        pos = draw(st.integers(0, len(key)))
        if op == "insert":
            key = key[:pos] + draw(st.sampled_from(KEY_NOISE) | st.characters()) + key[pos:]
        elif op == "delete" and key:
            key = key[:pos] + key[pos + 1 :]
        elif op == "replace" and pos < len(key):
            key = key[:pos] + draw(st.characters()) + key[pos + 1 :]
        elif op == "lower":
            key = key.lower()
        elif op == "zero":
            head, sep, tail = key.rpartition("/")
            key = f"{head}{sep}0{tail}"
        elif op == "at":
            key += "@"
    return key


key_inputs = st.one_of(
    st.text(max_size=60),
    mutated_keys(),
    components.map(lambda c: queue_of(c).key),
    st.text(alphabet="%/@0123456789abcdefABCDEF.-_~workflowactivity", max_size=40),
)


# --- target: snapshot validation --------------------------------------------------------------
json_leaves = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.integers(min_value=2**62, max_value=2**80),
    st.floats(),
    st.text(max_size=12),
    st.sampled_from([*INJECTIONS, "\x00", "\ud800", "a\x00b"]),
)
json_values = st.recursive(
    json_leaves,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=16,
)
storable_json = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(),
        st.floats(allow_nan=False, allow_infinity=False),
        st.text(max_size=12).filter(storable),
        st.sampled_from(INJECTIONS),
    ),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(st.text(max_size=8).filter(storable), inner, max_size=4)
    ),
    max_leaves=16,
)
json_objects = st.dictionaries(st.text(max_size=8), json_values, max_size=4)
timestamps = st.datetimes(timezones=st.just(UTC)).map(
    lambda d: d.isoformat(timespec="microseconds").replace("+00:00", "Z")
)


@st.composite
def documents(draw: st.DrawFn) -> dict[str, Any]:
    """A (mostly) valid format-4 or format-3 document built from hostile names."""
    fmt = draw(st.sampled_from([4, 4, 3]))
    runs = draw(st.lists(st.uuids().map(str), max_size=3, unique=True))
    executions = [
        Execution(
            run,
            draw(names),
            draw(names),
            draw(st.sampled_from(snapshot.STATUSES)),
            draw(st.sampled_from(snapshot.BEHAVIORS)),
            draw(st.none() | versions),
        ).as_record()
        for run in runs
    ]
    scheduled = []
    for run in runs:
        for event in draw(st.lists(st.integers(-(2**63), 2**63 - 1), max_size=2, unique=True)):
            scheduled.append(
                {
                    "runId": run,
                    "scheduledEventId": event,
                    "kind": draw(st.sampled_from(["workflow", "activity"])),
                    "startedAt": draw(st.none() | timestamps),
                }
            )
    queues, keys = [], set()
    for comp in draw(st.lists(components, max_size=3)):
        key = queue_of(comp).key
        if key in keys:
            continue
        keys.add(key)
        last = draw(st.integers(0, 2**63 - 1) | st.integers(0, 6))
        ack = draw(st.integers(0, last))
        ids = sorted(draw(st.sets(st.integers(ack + 1, max(ack + 1, last)), max_size=3)))
        ids = [i for i in ids if i <= last]
        queues.append(
            {
                "physicalQueue": key,
                "rangeId": draw(st.integers(0, 2**63 - 1)),
                "ackLevel": ack,
                "lastTaskId": last,
                "tasks": [{"taskId": i, "data": draw(json_objects)} for i in ids],
            }
        )
    user_data, families = [], set()
    for ns, tq in draw(st.lists(st.tuples(names, names), max_size=2)):
        if (ns, tq) not in families:
            families.add((ns, tq))
            user_data.append(
                {
                    "namespace": ns,
                    "taskQueue": tq,
                    "version": draw(st.integers(1, 2**63 - 1)),
                    "data": draw(json_values),
                }
            )
    return {
        "formatVersion": fmt,
        "queues": queues,
        "userData": user_data,
        "history": {"executions": executions, "scheduledTasks": scheduled},
        "protocol": {"min": 4, "max": 4} if fmt == 4 else {"min": 3, "max": 3},
    }


def _paths(node: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    yield path
    if isinstance(node, dict):
        for k, v in node.items():
            yield from _paths(v, (*path, k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _paths(v, (*path, i))


HOSTILE_VALUES = [
    None,
    -1,
    0,
    2**63,
    2**31,
    -(2**63) - 1,
    1.5,
    True,
    "",
    "\x00",
    "a\x00b",
    "\ud800",
    "not a date",
    "2026-13-45T99:99:99Z",
    [],
    {},
    {"deliveryId": 1},
    "auto",
    "ns/q/workflow/0@auto",
    float("nan"),
    float("inf"),
]


@st.composite
def mutated_documents(draw: st.DrawFn) -> dict[str, Any]:
    if draw(st.booleans()):
        doc = draw(documents())
    else:
        golden_doc = json.loads((fixtures_dir() / "snapshots" / "v3_golden.json").read_text())
        doc = golden_doc if draw(st.booleans()) else snapshot.upgrade_document(golden_doc)
    doc = copy.deepcopy(doc)
    for _ in range(draw(st.integers(1, 3))):
        paths = list(_paths(doc))[1:]
        if not paths:
            break
        path = draw(st.sampled_from(paths))
        parent = doc
        for step in path[:-1]:
            parent = parent[step]
        op = draw(st.sampled_from(["set", "set", "delete", "add"]))
        value = draw(st.sampled_from(HOSTILE_VALUES) | json_values)
        if op == "delete":
            del parent[path[-1]]
        elif op == "add" and isinstance(parent, dict):
            parent[draw(st.sampled_from(["deliveryId", "extra", "taskId", "physicalQueue"]))] = (
                value
            )
        else:
            parent[path[-1]] = value
    return doc


def _dump(doc: Any) -> str:
    return json.dumps(doc, ensure_ascii=draw_ascii(doc))


def draw_ascii(doc: Any) -> bool:
    """Lone surrogates only survive an ASCII dump (\\ud800 escapes); others go out as UTF-8."""
    try:
        json.dumps(doc, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


snapshot_inputs = st.one_of(
    mutated_documents().map(_dump),
    documents().map(_dump),
    json_values.map(_dump),
    st.binary(max_size=64),
    st.text(max_size=40),
    st.integers(1, 3000).map(lambda n: "[" * n + "]" * n),
    st.integers(1, 3000).map(lambda n: '{"formatVersion": 4, "queues": ' + "[" * n + "]" * n + "}"),
)


def check_snapshot(raw: str | bytes) -> str:
    try:
        doc = snapshot.parse(raw)
    except SnapshotError:
        return "rejected"
    assert doc["formatVersion"] == snapshot.CURRENT_FORMAT
    exported = snapshot.export_memory(snapshot.import_memory(doc))
    again = snapshot.parse(json.dumps(exported, ensure_ascii=True))
    assert snapshot.normalise(again) == snapshot.normalise(exported)
    assert _comparable(exported) == _comparable(doc)
    return "accepted"


# --- target: the snapshot importer on PostgreSQL ------------------------------------------------
def same_json(a: Any, b: Any) -> bool:
    """Equal as JSON: numbers compared as decimals (jsonb keeps 6.049558985430014e+16 as the
    number 60495589854300140, which Python then reads back as an int)."""
    from decimal import Decimal

    def canon(x: Any) -> Any:
        return json.loads(json.dumps(x), parse_float=Decimal, parse_int=Decimal)

    return bool(canon(a) == canon(b))


def _comparable(doc: dict[str, Any]) -> dict[str, Any]:
    """The fields a store keeps of a document (unknown extra keys are ignored on import, a
    missing deploymentVersion is null), timestamps as instants."""
    from datetime import datetime

    def instant(value: str | None) -> float | None:
        return None if value is None else datetime.fromisoformat(value).timestamp()

    return {
        "queues": sorted(
            (
                q["physicalQueue"],
                q["rangeId"],
                q["ackLevel"],
                q["lastTaskId"],
                sorted(((t["taskId"], t["data"]) for t in q["tasks"]), key=lambda t: t[0]),
            )
            for q in doc["queues"]
        ),
        "userData": sorted(
            ((u["namespace"], u["taskQueue"], u["version"], u["data"]) for u in doc["userData"]),
            key=lambda u: (u[0], u[1]),
        ),
        "executions": sorted(
            Execution.from_record(e).as_row() for e in doc["history"]["executions"]
        ),
        "scheduledTasks": sorted(
            (s["runId"], s["scheduledEventId"], s["kind"], instant(s.get("startedAt")))
            for s in doc["history"]["scheduledTasks"]
        ),
        "protocol": (doc["protocol"]["min"], doc["protocol"]["max"]),
    }


class Importer:
    """One empty head database; each example loads a document in a transaction, compares the
    export and rolls back (as `snapshot import` does, minus the commit)."""

    def __init__(self, dsn: str) -> None:
        self.conn = connect(dsn, application_name="qg-chaos-fuzz")

    def check(self, raw: str | bytes) -> str:
        try:
            doc = snapshot.parse(raw)
        except SnapshotError:
            return "rejected"
        try:
            with self.conn.transaction(force_rollback=True):
                state.load_document(self.conn, doc)
                exported = state.export_database(self.conn)
        except QueueguardError:
            assert state.is_empty(self.conn)
            return "rejected-by-database"
        assert state.is_empty(self.conn)  # rolled back: nothing left behind
        assert same_json(_comparable(exported), _comparable(doc))
        return "accepted"

    def close(self) -> None:
        self.conn.close()


# --- target: SQL injection through the runtime ------------------------------------------------
TABLES_SQL = "SELECT count(*) FROM pg_tables WHERE schemaname = 'public'"


class Injection:
    def __init__(self, dsn: str) -> None:
        from queueguard.stores.postgres import PostgresStore

        self.dsn = dsn
        self.store = PostgresStore(dsn, host_id="fuzz'; DROP TABLE tasks; --", pool_size=2)
        self.tables = _chaos.query(dsn, TABLES_SQL)

    def check(self, comp: tuple[str, str, str, int, str], workflow: str, data: Any) -> str:
        import uuid

        from queueguard.core.history import task_payload
        from queueguard.runtime.backlog import BacklogManager
        from queueguard.upgrade.status import inspect_workflow

        queue = queue_of(comp)
        run_id = str(uuid.uuid4())
        history = self.store.history
        history.add_execution(
            Execution(run_id, queue.namespace, workflow, "running", "pinned", comp[4] or None)
        )
        history.schedule_task(run_id, 7, queue.task_type)
        payload = task_payload(queue.namespace, workflow, run_id, queue.task_type, 7)
        payload["extra"] = data
        mgr = BacklogManager(self.store, queue, history)
        loaded = mgr.load()
        (task_id,) = mgr.spool_many([payload])
        assert task_id == loaded.last_task_id + 1
        (read,) = mgr.read()
        assert read.task_id == task_id and same_json(read.data, payload)
        assert mgr.dispatch(task_id).value == "started"
        stored = self.store.queue_state(queue)
        assert stored is not None and stored.ack_level == task_id
        row = _chaos.query(
            self.dsn,
            "SELECT namespace, task_queue, task_type, partition, version FROM task_queues "
            "WHERE physical_queue = %s",
            (queue.key,),
        )
        assert row == [comp], (row, comp)
        seen = inspect_workflow(self.dsn, workflow, queue.namespace)
        assert seen["workflowId"] == workflow
        assert all(t["physical_queue"] == queue.key for t in seen["tasks"])
        version = self.store.get_user_data(queue.namespace, queue.task_queue).version
        assert (
            self.store.put_user_data(queue.namespace, queue.task_queue, version, {"w": workflow})
            == version + 1
        )
        assert self.store.get_user_data(queue.namespace, queue.task_queue).data == {"w": workflow}
        assert _chaos.query(self.dsn, TABLES_SQL) == self.tables
        return "round-tripped"

    def close(self) -> None:
        self.store.close()


# --- CLI: in-process and spawned ----------------------------------------------------------------
def run_main(argv: list[str]) -> tuple[int, str, str]:
    """cli.main in this process: (exit code, stdout, stderr); any escaping exception fails."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.main(argv)
    return code, out.getvalue(), err.getvalue()


def run_spawned(argv: list[str], env: dict[str, str] | None = None) -> tuple[int, str, str]:
    done = subprocess.run(
        [QUEUEGUARD, *argv],
        capture_output=True,
        text=True,
        timeout=180,
        env={**os.environ, **(env or {})},
        cwd="/tmp",
    )
    return done.returncode, done.stdout, done.stderr


def fingerprint(dsn: str) -> list[tuple[Any, ...]]:
    """Tables, revision and row counts: enough to see any write a command made."""
    rows = _chaos.query(
        dsn,
        "SELECT c.relname, c.relkind FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
        "WHERE n.nspname NOT IN ('pg_catalog', 'information_schema', 'pg_toast') ORDER BY 1",
    )
    for table in ("queueguard_version", "task_queues", "tasks", "executions", "runtime_protocol"):
        if any(r[0] == table for r in rows):
            rows += _chaos.query(
                dsn,
                f"SELECT '{table}', md5(string_agg(t::text, ',' ORDER BY t::text)) FROM {table} t",
            )
    return rows


FIXTURE_NAMES = ["v0.1", "v0.2", "v0.3"]
fixture_names = st.one_of(
    st.sampled_from(FIXTURE_NAMES),
    st.sampled_from(
        [
            "../v0.3",
            "v0.3/",
            "V0.3",
            "v0.3\x00",
            "snapshots",
            "legacy_workers",
            "negative",
            "",
            ".",
            "..",
            "/etc/passwd",
            "v0.3 ",
            "*",
        ]
    ),
    names,
    st.text(max_size=12),
)


class FixtureTarget:
    """`fixtures load NAME --dsn` against a database in one of several states."""

    def __init__(self, admin: str) -> None:
        self.admin = admin
        self.dsn = pgsource_create(admin)

    def reset(self, kind: str) -> None:
        _chaos.query(self.dsn, "DROP SCHEMA public CASCADE; CREATE SCHEMA public")
        if kind == "foreign":
            _chaos.query(self.dsn, "CREATE TABLE customers (id int PRIMARY KEY)")
        elif kind == "loaded":
            golden.load(golden.get("v0.2"), self.dsn)

    def check(self, name: str, kind: str) -> str:
        self.reset(kind)
        before = fingerprint(self.dsn)
        if "\x00" in name:  # a NUL cannot be passed in argv: argparse never sees it
            return "unpassable"
        code, _, err = run_main(["fixtures", "load", name, "--dsn", self.dsn])
        assert code in (0, 1, 2), (code, err)
        if code == 0:
            assert name in FIXTURE_NAMES and kind == "empty", (name, kind)
            assert _chaos.query(self.dsn, "SELECT version_num FROM queueguard_version") == [
                (golden.get(name).revision,)
            ]
            return "loaded"
        assert fingerprint(self.dsn) == before, (name, kind, err)
        assert "Traceback" not in err
        return "refused"

    def close(self) -> None:
        import queueguard.pg.scratch as pgsource

        pgsource.drop_database(self.admin, pgsource.dbname_of(self.dsn))


def pgsource_create(admin: str) -> str:
    import queueguard.pg.scratch as pgsource

    return pgsource.create_database(admin, prefix="qg_chaos_fuzz")


durations = st.one_of(
    st.sampled_from(
        [
            "5s",
            "500ms",
            "2m",
            "0",
            "-1",
            "1e9",
            "99999999999s",
            "NaN",
            "5 s",
            "",
            "１s",
            "0.0001ms",
            "3h",
            "2147483647ms",
            "2147483648ms",
        ]
    ),
    st.text(max_size=6),
)
counts = st.one_of(
    st.integers(-5, 5).map(str),
    st.sampled_from(["-1", "1000001", "99999999999999999999", "x", "", "1.5"]),
)
revisions = st.one_of(
    st.sampled_from(
        ["001", "002", "003", "004", "head", "005", "000", "4", "０04", "../004", "HEAD", ""]
    ),
    st.text(max_size=5),
)
hostile_dsns = st.sampled_from(
    [
        "host=/nonexistent port=1",
        "postgresql://u:hunter2@127.0.0.1:1/x",
        "not a dsn ' unterminated",
        "dbname=x password='unterminated",
        "",
        "postgresql://%zz@/x",
        "host=127.0.0.1 port=99999",
        "service=nonexistent",
    ]
)


@st.composite
def command_lines(draw: st.DrawFn, dsn: str, files: dict[str, str]) -> list[str]:
    """A command line of the data commands (never `db`, `demo` or `verify`: they act on the
    shared embedded server)."""
    target = ["--dsn", draw(st.just(dsn) | hostile_dsns)] if draw(st.booleans()) else []
    command = draw(
        st.sampled_from(
            [
                "upgrade",
                "preflight",
                "status",
                "inspect",
                "fixtures",
                "snapshot",
                "lint",
                "rehearse",
                "garbage",
            ]
        )
    )
    argv: list[str]
    if command == "upgrade":
        argv = ["upgrade", *target]
        for opt, values in (
            ("--to", revisions),
            ("--lock-timeout", durations),
            ("--statement-timeout", durations),
            ("--retries", counts),
        ):
            if draw(st.booleans()):
                argv += [opt, draw(values)]
        argv += draw(
            st.lists(st.sampled_from(["--force", "--json", "--sql"]), max_size=2, unique=True)
        )
    elif command == "preflight":
        argv = ["preflight", *target]
        for opt, values in (
            ("--target", revisions),
            ("--lock-timeout", durations),
            ("--statement-timeout", durations),
            ("--samples", counts),
            ("--fail-on", st.sampled_from(["blocking", "warning", "info", ""])),
        ):
            if draw(st.booleans()):
                argv += [opt, draw(values)]
        argv += draw(st.lists(st.just("--json"), max_size=1))
    elif command == "status":
        argv = ["status", *target, *draw(st.lists(st.just("--json"), max_size=1))]
    elif command == "inspect":
        argv = ["inspect", draw(names), *target]
        if draw(st.booleans()):
            argv += ["--namespace", draw(names)]
        argv += draw(st.lists(st.just("--json"), max_size=1))
    elif command == "fixtures":
        argv = ["fixtures", draw(st.sampled_from(["list", "load", "unload"]))]
        if draw(st.booleans()):
            argv.append(draw(fixture_names))
        argv += target + draw(st.lists(st.just("--json"), max_size=1))
    elif command == "snapshot":
        argv = ["snapshot", "import", draw(st.sampled_from(sorted(files.values()))), *target]
    elif command == "lint":
        # Never "/": lint would walk the whole file system looking for .sql files.
        paths = [*sorted(files.values()), "/nonexistent"]
        argv = ["lint", *draw(st.lists(st.sampled_from(paths), max_size=2))]
    elif command == "rehearse":
        argv = ["rehearse", "--dsn", draw(hostile_dsns)]
    else:
        argv = draw(st.lists(st.text(max_size=10), max_size=4))
    return [a for a in argv if "\x00" not in a]


WRITERS = ("upgrade", "fixtures", "snapshot")


class CliTarget:
    """Command lines against a database at 003 (the v0.3 fixture); if a command changed it,
    it must have been a writing command that succeeded, and the database is rebuilt."""

    def __init__(self, admin: str, folder: Path, spawn: bool) -> None:
        import queueguard.pg.scratch as pgsource

        self.admin, self.spawn = admin, spawn
        self.dsn = pgsource.create_database(admin, prefix="qg_chaos_fuzz")
        self._fresh()
        folder.mkdir(parents=True, exist_ok=True)
        garbage = folder / "garbage.json"
        garbage.write_bytes(b"\xff\xfe{not json")
        deep = folder / "deep.json"
        deep.write_text("[" * 50000 + "]" * 50000)
        self.files = {
            "golden": str(fixtures_dir() / "snapshots" / "v3_golden.json"),
            "legacy": str(fixtures_dir() / "snapshots" / "legacy_v1.json"),
            "garbage": str(garbage),
            "deep": str(deep),
            "dir": str(folder),
            "missing": str(folder / "missing.json"),
        }
        self.rebuilt = 0

    def _fresh(self) -> None:
        """Back to the v0.3 fixture, in place (the DSN in the drawn command lines stays)."""
        _chaos.query(self.dsn, "DROP SCHEMA public CASCADE; CREATE SCHEMA public")
        golden.load(golden.get("v0.3"), self.dsn)
        self.before = fingerprint(self.dsn)

    def check(self, argv: list[str]) -> str:
        env = {"QUEUEGUARD_DSN": self.dsn}
        if self.spawn:
            code, _, err = run_spawned(argv, env)
        else:
            saved = os.environ.get("QUEUEGUARD_DSN")
            os.environ["QUEUEGUARD_DSN"] = self.dsn
            try:
                code, _, err = run_main(argv)
            finally:
                if saved is None:
                    os.environ.pop("QUEUEGUARD_DSN", None)
                else:
                    os.environ["QUEUEGUARD_DSN"] = saved
        assert code in (0, 1, 2), (argv, code, err[-2000:])
        assert "Traceback" not in err, (argv, err[-3000:])
        after = fingerprint(self.dsn)
        if after != self.before:
            assert code == 0 and argv[0] in WRITERS, (argv, code, err[-1000:])
            self.rebuilt += 1
            self._fresh()
        return f"exit {code}"

    def close(self) -> None:
        import queueguard.pg.scratch as pgsource

        pgsource.drop_database(self.admin, pgsource.dbname_of(self.dsn))


# --- running targets outside pytest --------------------------------------------------------------
@dataclass
class TargetResult:
    name: str
    examples: int
    outcomes: Counter[str]
    seconds: float
    failure: str | None = None


@dataclass
class Result:
    targets: list[TargetResult] = field(default_factory=list)

    @property
    def failures(self) -> list[str]:
        return [f"{t.name}: {t.failure}" for t in self.targets if t.failure]


def explore(
    name: str,
    strategy: Any,
    check: Callable[..., str],
    examples: int,
    *,
    star: bool = False,
    shrink: bool = True,
) -> TargetResult:
    """Run one target for `examples` examples; `star`: the strategy draws argument tuples;
    `shrink=False` for slow targets (a failure is reported as first found)."""
    outcomes: Counter[str] = Counter()
    phases = [Phase.explicit, Phase.generate] + ([Phase.shrink] if shrink else [])

    @settings(
        max_examples=examples,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
        phases=phases,
    )
    @given(strategy)
    def prop(value: Any) -> None:
        outcomes[check(*value) if star else check(value)] += 1

    started = time.monotonic()
    failure = None
    try:
        prop()
    except Exception as exc:  # hypothesis re-raises the shrunk failing example
        failure = f"{type(exc).__name__}: {str(exc)[:2000]}"
    return TargetResult(name, sum(outcomes.values()), outcomes, time.monotonic() - started, failure)


def run(*, pure: int = 2000, db: int = 200, cli_spawned: int = 200, log: Any = say) -> Result:
    result = Result()

    def add(target: TargetResult) -> None:
        result.targets.append(target)
        log(
            f"  {target.name}: {target.examples} examples in {target.seconds:.0f} s "
            f"{dict(target.outcomes)}"
            + (f" FAILED {target.failure[:300]}" if target.failure else "")
        )

    add(explore("queue-key decoder", key_inputs, check_key, pure))
    add(explore("snapshot validation", snapshot_inputs, check_snapshot, pure))
    admin = _chaos.admin_dsn()
    with _chaos.scratch_database(admin) as dsn:
        importer = Importer(dsn)
        try:
            importer_inputs = st.one_of(documents().map(_dump), mutated_documents().map(_dump))
            add(explore("snapshot importer (PostgreSQL)", importer_inputs, importer.check, db))
        finally:
            importer.close()
    with _chaos.scratch_database(admin) as dsn:
        injection = Injection(dsn)
        try:
            add(
                explore(
                    "SQL injection round trip",
                    st.tuples(components, names, storable_json),
                    injection.check,
                    db,
                    star=True,
                    shrink=False,
                )
            )
        finally:
            injection.close()
    fixtures = FixtureTarget(admin)
    try:
        kinds = st.sampled_from(["empty", "empty", "loaded", "foreign"])
        add(
            explore(
                "fixture loading (CLI)",
                st.tuples(fixture_names, kinds),
                fixtures.check,
                db,
                star=True,
                shrink=False,
            )
        )
    finally:
        fixtures.close()
    import tempfile

    folder = Path(tempfile.mkdtemp(prefix="qg-chaos-fuzz-"))
    for spawn, count in ((False, db), (True, cli_spawned)):
        target = CliTarget(admin, folder, spawn)
        try:
            label = "CLI arguments (spawned)" if spawn else "CLI arguments (in-process main)"
            add(
                explore(
                    label,
                    command_lines(target.dsn, target.files),
                    target.check,
                    count,
                    shrink=False,
                )
            )
        finally:
            target.close()
    shutil.rmtree(folder, ignore_errors=True)
    return result


def report(result: Result, scale: str) -> None:
    total = sum(t.examples for t in result.targets)
    refusals = ("rejected", "rejected-by-database", "refused", "exit 1", "exit 2")
    rejected = sum(n for t in result.targets for o, n in t.outcomes.items() if o in refusals)
    row = {
        "Scenario": "Hostile input (fuzz)",
        "Scale": scale,
        "Faults injected": f"{total:,} hostile inputs over {len(result.targets)} targets",
        "Tasks produced": "n/a (inputs, not tasks)",
        "Lost": "0 partial writes",
        "Duplicated-and-rejected": "n/a",
        "Worst stall": "n/a",
        "CI test (small scale)": CI_TEST,
    }
    details = ["| target | examples | outcomes | time |", "|---|---|---|---|"]
    for t in result.targets:
        outcomes = ", ".join(f"{k} {v:,}" for k, v in t.outcomes.most_common())
        details.append(f"| {t.name} | {t.examples:,} | {outcomes} | {t.seconds:.0f} s |")
    details.append("")
    details.append(
        f"Untyped errors, tracebacks or partial writes: {len(result.failures)}; inputs "
        f"rejected or refused with a typed error / exit 1 or 2: {rejected:,}. `unpassable`: "
        "a NUL in a command-line argument, which no process can receive."
    )
    _chaos.record(7, row, details)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pure", type=int, default=2000, help="examples per pure target")
    parser.add_argument("--db", type=int, default=200, help="examples per database target")
    parser.add_argument("--cli", type=int, default=200, help="spawned CLI examples")
    parser.add_argument("--no-docs", action="store_true")
    args = parser.parse_args()
    say(f"scenario 7: fuzz, {args.pure} / {args.db} / {args.cli} examples")
    result = run(pure=args.pure, db=args.db, cli_spawned=args.cli)
    assert not result.failures, "\n".join(result.failures)
    if not args.no_docs:
        report(
            result,
            f"{args.pure:,} examples per pure target, {args.db} per database target, "
            f"{args.cli} spawned CLI runs",
        )
    say("every input accepted correctly or rejected with a typed error; nothing partially written")


if __name__ == "__main__":
    main()
