CREATE TABLE crlf (id int);
-- a comment; in CRLF
INSERT INTO crlf VALUES (1),
    (2);
SELECT $$a
;b$$;
