"""Target: SQL injection through the runtime (database).

Namespaces, task queue names, versions, workflow ids and user data built from injection
strings round-trip as data through the runtime (load, append, read, checkpoint, user data
CAS) and `inspect`; the schema is intact afterwards.
"""

from __future__ import annotations

import uuid
from typing import Any

from bench.chaos.fuzz.hostile_names import queue_of
from bench.chaos.fuzz.snapshot_targets import same_json
from bench.common.databases import query
from queueguard.core.history import task_payload
from queueguard.core.store import Execution
from queueguard.queue_schema.status import inspect_workflow
from queueguard.runtime.backlog import BacklogManager
from queueguard.stores.postgres import PostgresStore

TABLES_SQL = "SELECT count(*) FROM pg_tables WHERE schemaname = 'public'"


class Injection:
    def __init__(self, dsn: str) -> None:
        self.dsn = dsn
        self.store = PostgresStore(dsn, host_id="fuzz'; DROP TABLE tasks; --", pool_size=2)
        self.tables = query(dsn, TABLES_SQL)

    def check(self, comp: tuple[str, str, str, int, str], workflow: str, data: Any) -> str:
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
        row = query(
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
        assert query(self.dsn, TABLES_SQL) == self.tables
        return "round-tripped"

    def close(self) -> None:
        self.store.close()
