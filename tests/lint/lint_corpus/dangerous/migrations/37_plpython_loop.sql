-- expect: migration.row_loop
-- Loops in other procedural languages are loops too.
SET lock_timeout = '5s';
SET statement_timeout = '60s';
DO LANGUAGE plpython3u $$
for row in plpy.execute('SELECT task_id FROM tasks'):
    plpy.execute('SELECT 1')
$$;
