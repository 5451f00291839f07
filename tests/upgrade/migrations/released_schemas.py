"""The schema each released revision (001–004) has: columns and constraints per table."""

from __future__ import annotations

TS = "timestamp with time zone"
V1_COLUMNS: dict[str, dict[str, tuple[str, bool, str | None]]] = {
    "executions": {
        "run_id": ("uuid", False, None),
        "namespace": ("text", False, None),
        "workflow_id": ("text", False, None),
        "status": ("text", False, None),
        "versioning_behavior": ("text", False, None),
        "deployment_version": ("text", True, None),
        "created_at": (TS, False, "now()"),
    },
    "scheduled_tasks": {
        "run_id": ("uuid", False, None),
        "scheduled_event_id": ("bigint", False, None),
        "kind": ("text", False, None),
        "started_at": (TS, True, None),
    },
    "tasks": {
        "delivery_id": ("bigint", False, "nextval('tasks_delivery_id_seq'::regclass)"),
        "namespace": ("text", False, None),
        "task_queue": ("text", False, None),
        "task_type": ("text", False, None),
        "partition": ("integer", False, None),
        "version": ("text", False, "''::text"),
        "data": ("jsonb", False, None),
        "created_at": (TS, False, "now()"),
    },
    "queueguard_version": {"version_num": ("character varying(32)", False, None)},
}
TYPE_CHECK = "CHECK (task_type = ANY (ARRAY['workflow'::text, 'activity'::text]))"
V1_KEYS = {
    "executions": {
        "PRIMARY KEY (run_id)",
        "CHECK (status = ANY (ARRAY['running'::text, 'completed'::text, 'failed'::text, "
        "'terminated'::text]))",
        "CHECK (versioning_behavior = ANY (ARRAY['unversioned'::text, 'auto_upgrade'::text, "
        "'pinned'::text]))",
    },
    "scheduled_tasks": {
        "PRIMARY KEY (run_id, scheduled_event_id)",
        "FOREIGN KEY (run_id) REFERENCES executions(run_id) ON DELETE CASCADE",
        "CHECK (kind = ANY (ARRAY['workflow'::text, 'activity'::text]))",
    },
    "tasks": {"PRIMARY KEY (delivery_id)", TYPE_CHECK, "CHECK (partition >= 0)"},
    "queueguard_version": {"PRIMARY KEY (version_num)"},
}
V2_COLUMNS = {
    **V1_COLUMNS,
    "task_queue_user_data": {
        "namespace": ("text", False, None),
        "task_queue": ("text", False, None),
        "version": ("bigint", False, None),
        "data": ("jsonb", False, None),
        "updated_at": (TS, False, "now()"),
    },
}
V2_KEYS = {**V1_KEYS, "task_queue_user_data": {"PRIMARY KEY (namespace, task_queue)"}}
KEY_TYPE = 'text COLLATE "C"'  # byte order for queue keys (docs/data-model.md)
V3_COLUMNS = {
    **V2_COLUMNS,
    "tasks": {
        "physical_queue": (KEY_TYPE, False, None),
        "task_id": ("bigint", False, None),
        "data": ("jsonb", False, None),
        "created_at": (TS, False, "now()"),
    },
    "task_queues": {
        "physical_queue": (KEY_TYPE, False, None),
        "namespace": ("text", False, None),
        "task_queue": ("text", False, None),
        "task_type": ("text", False, None),
        "partition": ("integer", False, None),
        "version": ("text", False, None),
        "range_id": ("bigint", False, None),
        "ack_level": ("bigint", False, None),
        "last_task_id": ("bigint", False, None),
    },
    "runtime_protocol": {
        "min_protocol": ("integer", False, None),
        "max_protocol": ("integer", False, None),
    },
}
V3_KEYS = {
    **V2_KEYS,
    "tasks": {"PRIMARY KEY (physical_queue, task_id)"},
    "task_queues": {
        "PRIMARY KEY (physical_queue)",
        TYPE_CHECK,
        "CHECK (partition >= 0)",
        "CHECK (0 <= ack_level AND ack_level <= last_task_id)",
    },
    "runtime_protocol": {"CHECK (min_protocol <= max_protocol)"},
}
V4_COLUMNS = {
    **V3_COLUMNS,
    "queueguard_migrations": {
        "revision": ("text", False, None),
        "sha256": ("text", False, None),
        "applied_at": (TS, False, "now()"),
    },
}
V4_KEYS = {
    **V3_KEYS,
    "queueguard_migrations": {"PRIMARY KEY (revision)", "CHECK (sha256 ~ '^[0-9a-f]{64}$'::text)"},
}
RELEASED = {
    "001": (V1_COLUMNS, V1_KEYS),
    "002": (V2_COLUMNS, V2_KEYS),
    "003": (V3_COLUMNS, V3_KEYS),
    "004": (V4_COLUMNS, V4_KEYS),
}
