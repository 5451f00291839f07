CREATE TABLE "odd;name" ("say ""hi"";" text, "end" int);
ALTER TABLE "odd;name" RENAME COLUMN "end" TO "begin";
DROP TABLE "odd;name";
