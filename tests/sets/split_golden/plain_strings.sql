-- Plain strings: '' is a quote; with standard_conforming_strings on, a backslash is just a
-- character, so 'C:\' ends at its second quote.
INSERT INTO settings (name, value) VALUES ('greeting', 'it''s; fine');
INSERT INTO settings (name, value) VALUES ('backup_dir', 'C:\');
UPDATE settings SET value = ';' WHERE name = 'separator';
SELECT 'one;'
       'two;';
