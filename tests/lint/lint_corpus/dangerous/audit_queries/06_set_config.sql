-- expect: audit.not_read_only
-- A setting changed by a function call.
SELECT set_config('lock_timeout', '0', false);
