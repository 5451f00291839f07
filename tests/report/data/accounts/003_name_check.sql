ALTER TABLE account ADD CONSTRAINT account_name_present CHECK (name <> '' AND name NOT LIKE '%|%');
