CREATE OR REPLACE FUNCTION touch_updated_at() RETURNS trigger
LANGUAGE plpgsql AS $body$
BEGIN
    NEW.updated_at := now();
    RETURN NEW;
END;
$body$;

CREATE TRIGGER tasks_touch BEFORE UPDATE ON tasks
    FOR EACH ROW EXECUTE FUNCTION touch_updated_at();

CREATE FUNCTION next_id(seq text) RETURNS bigint AS $$
    SELECT nextval(seq::regclass);
$$ LANGUAGE sql;
