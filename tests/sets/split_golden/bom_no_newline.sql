CREATE TABLE bom (id int);
INSERT INTO bom VALUES (1);
SELECT count(*) FROM bom