-- 003 (v0.3): builds the new tasks table beside the old one, copies it with consecutive
-- per-queue ids in delivery order (created_at kept), backfills metadata for the queues that
-- have rows (range 0, ack 0, last = row count), and swaps. Released; frozen history.
-- quote(s, safe='') over UTF-8, as Python's urllib.parse.quote; pg_temp so nothing remains.
CREATE FUNCTION pg_temp.queueguard_quote(s text) RETURNS text
LANGUAGE sql IMMUTABLE STRICT AS $$
    SELECT coalesce(string_agg(
        CASE WHEN c ~ '^[A-Za-z0-9_.~-]$' THEN c
             ELSE upper(regexp_replace(encode(convert_to(c, 'UTF8'), 'hex'), '(..)', '%\1', 'g'))
        END, '' ORDER BY i), '')
    FROM regexp_split_to_table(s, '') WITH ORDINALITY AS chars(c, i)
$$;

CREATE TABLE task_queues (
    physical_queue text COLLATE "C" PRIMARY KEY,
    namespace text NOT NULL,
    task_queue text NOT NULL,
    task_type text NOT NULL CHECK (task_type IN ('workflow', 'activity')),
    partition int NOT NULL CHECK (partition >= 0),
    version text NOT NULL,
    range_id bigint NOT NULL,
    ack_level bigint NOT NULL,
    last_task_id bigint NOT NULL,
    CHECK (0 <= ack_level AND ack_level <= last_task_id)
);

CREATE TABLE runtime_protocol (
    min_protocol int NOT NULL,
    max_protocol int NOT NULL,
    CHECK (min_protocol <= max_protocol)
);
-- A unique index over a constant: at most one row; the runtime refuses on zero rows.
CREATE UNIQUE INDEX runtime_protocol_single_row ON runtime_protocol ((true));
INSERT INTO runtime_protocol (min_protocol, max_protocol) VALUES (3, 3);

CREATE TABLE tasks_v3 (
    physical_queue text COLLATE "C" NOT NULL,
    task_id bigint NOT NULL,
    data jsonb NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (physical_queue, task_id)
);

CREATE TEMP TABLE legacy_keys ON COMMIT DROP AS
SELECT namespace, task_queue, task_type, partition, version,
       pg_temp.queueguard_quote(namespace) || '/' || pg_temp.queueguard_quote(task_queue)
       || '/' || task_type || '/' || partition::text
       || CASE WHEN version = '' THEN '' ELSE '@' || pg_temp.queueguard_quote(version) END
       AS physical_queue
FROM (SELECT DISTINCT namespace, task_queue, task_type, partition, version FROM tasks) q;

INSERT INTO tasks_v3 (physical_queue, task_id, data, created_at)
SELECT k.physical_queue,
       row_number() OVER (PARTITION BY k.physical_queue ORDER BY t.delivery_id),
       t.data, t.created_at
FROM tasks t
JOIN legacy_keys k USING (namespace, task_queue, task_type, partition, version);

INSERT INTO task_queues (physical_queue, namespace, task_queue, task_type, partition,
                         version, range_id, ack_level, last_task_id)
SELECT k.physical_queue, k.namespace, k.task_queue, k.task_type, k.partition, k.version,
       0, 0, (SELECT count(*) FROM tasks_v3 n WHERE n.physical_queue = k.physical_queue)
FROM legacy_keys k;

DROP TABLE tasks;
ALTER TABLE tasks_v3 RENAME TO tasks;
ALTER INDEX tasks_v3_pkey RENAME TO tasks_pkey;
