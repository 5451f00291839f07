CREATE TABLE accounts (id bigint PRIMARY KEY, email text NOT NULL);
