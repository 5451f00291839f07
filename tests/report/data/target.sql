-- The target the sqldir set (data/accounts/) is planned and rehearsed against: 3000 accounts
-- at no revision of the set (its ledger is absent).
CREATE TABLE account (id int PRIMARY KEY, name text NOT NULL, balance int NOT NULL);
INSERT INTO account SELECT g, 'a' || g, g % 100 FROM generate_series(1, 3000) g;
ANALYZE account;
