"""The application: its models, and where its migrations live (it overrides script_location
in code, as installed applications do)."""

from pathlib import Path

MIGRATIONS = Path(__file__).parent / "store" / "db_migrations"
