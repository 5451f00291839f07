CREATE INDEX account_name_idx ON account (name);
ALTER TABLE account ADD COLUMN note text DEFAULT 'none';
