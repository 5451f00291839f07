-- What no revision may change: each account's balance (verify runs it before and after each
-- fixture's upgrade, rehearse on a copy of production).

-- name: balances
SELECT id, name, balance FROM account;
