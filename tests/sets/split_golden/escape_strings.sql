INSERT INTO messages (body) VALUES (E'it\'s; escaped');
INSERT INTO messages (body) VALUES (e'a backslash \\'), (E'doubled '' quote; too');
SELECT E'tab\there', E'\x41\101\u0041';
-- an E-string continued on the next line keeps its escapes: \' below does not end it
SELECT E'first\''
    '\'; still the same string';
SELECT 'plain\'
    '; a second literal';
