-- The accounts' balances, whatever type the column has: the same before and after.
-- name: balances
SELECT id, name, balance::numeric AS balance FROM account;
