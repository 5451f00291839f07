-- header comment; with a semicolon
/* a block comment; on its own */
CREATE TABLE queue (
    id bigint, -- the key; not a terminator
    /* a nested /* block; */ comment; */ name text
);
SELECT '-- not a comment', '/* nor this */';
SELECT 1 -- a trailing remark
;
SELECT 2 /* inline */ + 3;
-- a trailing comment after the last statement; not a statement
/* nor is this one; */
