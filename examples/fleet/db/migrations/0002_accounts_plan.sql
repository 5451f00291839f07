ALTER TABLE accounts ADD COLUMN plan text NOT NULL DEFAULT 'free';
CREATE INDEX accounts_plan_idx ON accounts (plan);
