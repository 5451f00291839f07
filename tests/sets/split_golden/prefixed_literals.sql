SELECT U&'d\0061t\+000061; unicode' AS s, U&"col;umn" AS q;
SELECT B'1010', X'1F;', N'national; text';
SELECT u&'x'', still;' UESCAPE '!';
