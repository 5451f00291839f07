-- expect: migration.hot_path_trigger
-- A rewrite rule is a trigger by another name.
SET lock_timeout = '5s';
SET statement_timeout = '60s';
CREATE RULE tasks_archive AS ON DELETE TO tasks
DO ALSO INSERT INTO tasks_archive SELECT OLD.*;
