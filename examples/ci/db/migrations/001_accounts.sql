CREATE TABLE account (id bigint PRIMARY KEY, name text NOT NULL, balance bigint NOT NULL DEFAULT 0);
