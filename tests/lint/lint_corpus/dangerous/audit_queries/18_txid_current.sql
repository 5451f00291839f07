-- expect: audit.not_read_only
-- Assigning a transaction id is a write.
SELECT txid_current();
