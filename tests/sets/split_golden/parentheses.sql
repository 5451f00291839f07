-- psql does not end a statement at a ; inside parentheses: a rule's action list holds
-- several statements and is sent as one
CREATE RULE log_task AS ON INSERT TO tasks DO ALSO (
    INSERT INTO task_log (id) VALUES (NEW.id);
    NOTIFY tasks_changed
);
CREATE TABLE t (a int, b int);
