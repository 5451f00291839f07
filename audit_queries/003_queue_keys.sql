-- check:    data.queue_key_invalid (blocking), data.relocation_destination_mismatch (blocking)
-- applies-to: 003 004
-- What:     task_queues rows whose key is not the canonical encoding of its component
--           columns (quote(namespace)/quote(task_queue)/type/partition[@quote(version)], quote
--           being urllib.parse.quote(s, safe='') over UTF-8), or whose components are invalid;
--           and legacy @auto queues whose default destination row exists with other
--           components, which would make 004 relocate into the wrong queue.
-- Cost:     one scan of task_queues (small: one row per physical queue); tasks is not read.
-- Locks:    ACCESS SHARE on task_queues. Read-only; returns no row when clean.
WITH quoted AS (
    SELECT q.*,
           (SELECT coalesce(string_agg(CASE WHEN c ~ '^[A-Za-z0-9_.~-]$' THEN c
                    ELSE upper(regexp_replace(encode(convert_to(c, 'UTF8'), 'hex'), '(..)', '%\1', 'g'))
                    END, '' ORDER BY i), '')
            FROM regexp_split_to_table(q.namespace, '') WITH ORDINALITY AS x(c, i)) AS q_namespace,
           (SELECT coalesce(string_agg(CASE WHEN c ~ '^[A-Za-z0-9_.~-]$' THEN c
                    ELSE upper(regexp_replace(encode(convert_to(c, 'UTF8'), 'hex'), '(..)', '%\1', 'g'))
                    END, '' ORDER BY i), '')
            FROM regexp_split_to_table(q.task_queue, '') WITH ORDINALITY AS x(c, i)) AS q_task_queue,
           (SELECT coalesce(string_agg(CASE WHEN c ~ '^[A-Za-z0-9_.~-]$' THEN c
                    ELSE upper(regexp_replace(encode(convert_to(c, 'UTF8'), 'hex'), '(..)', '%\1', 'g'))
                    END, '' ORDER BY i), '')
            FROM regexp_split_to_table(q.version, '') WITH ORDINALITY AS x(c, i)) AS q_version
    FROM task_queues q
), invalid AS (
    SELECT physical_queue AS object
    FROM quoted
    WHERE namespace = '' OR task_queue = ''
       OR NOT (version = '' OR version = 'auto' OR strpos(version, '.') > 0)
       OR physical_queue <> q_namespace || '/' || q_task_queue || '/' || task_type || '/'
                            || partition::text
                            || CASE WHEN version = '' THEN '' ELSE '@' || q_version END
), mismatch AS (
    SELECT s.physical_queue AS object
    FROM task_queues s
    JOIN task_queues d
      ON d.physical_queue = left(s.physical_queue, length(s.physical_queue) - length('@auto'))
    WHERE s.version = 'auto'
      AND (d.version <> '' OR (d.namespace, d.task_queue, d.task_type, d.partition)
                              IS DISTINCT FROM (s.namespace, s.task_queue, s.task_type, s.partition))
)
SELECT code,
       'blocking' AS severity,
       'task_queues' AS object,
       count(*) AS count,
       coalesce(jsonb_agg(to_jsonb(object) ORDER BY object) FILTER (
           WHERE n <= coalesce(nullif(current_setting('queueguard.samples', true), ''), '10')::int),
           '[]'::jsonb) AS samples
FROM (
    SELECT code, object, row_number() OVER (PARTITION BY code ORDER BY object) AS n
    FROM (SELECT 'data.queue_key_invalid' AS code, object FROM invalid
          UNION ALL
          SELECT 'data.relocation_destination_mismatch', object FROM mismatch) f
) findings
GROUP BY code
ORDER BY code;
