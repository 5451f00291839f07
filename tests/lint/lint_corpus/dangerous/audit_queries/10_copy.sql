-- expect: audit.not_read_only
-- COPY moves data in or out of the server.
COPY tasks TO STDOUT;
