-- Not in the manifest: the tool never reads it, and neither does load().
DROP TABLE dogs;
