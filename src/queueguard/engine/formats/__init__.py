"""What a format whose revisions run through their own tool adds to the engine: `alembic`
(the project's env.py) and `django` (Django's migrate in the project's interpreter), each
with its runner, the SQL its revisions run as under `--online`, and `plan`'s trace of it.
The SQL formats (Temporal, plain folders) need nothing here: the engine runs their
statements itself."""
