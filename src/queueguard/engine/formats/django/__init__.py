"""A Django project in the engine: `runner` (Django's migrate with queueguard's gates),
`online` and `online_sql` (migrations run as their captured SQL under `--online`), `trace`
(plan's watch of its migrations)."""
