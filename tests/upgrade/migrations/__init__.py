"""The migration set 001–004 on real PostgreSQL (issue 3)."""
