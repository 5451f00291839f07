# mypy: ignore-errors
# (runs in the project's interpreter, beside its Django: not typed against ours)
"""Where the capture half of queueguard's Django runner (`__main__.py` beside it) hooks in,
once a process: Django's execute wrapper on every connection (those to come too), the
drivers' cursors (psycopg 3's execute, psycopg2's cursor factory) for statements that
bypass Django's cursor, and `migrate`'s pre/post_migrate signals that set the capture's
phase. Apart from the capture, which decides what each statement is, because this patches
Django and the drivers. Standard library and Django only."""


def _tap_drivers(capture):
    """Every psycopg (3) cursor's execute reports to `capture.raw` (a raw cursor included);
    psycopg2's, through the cursor factory of every connection it opens."""
    try:
        import psycopg
    except ImportError:
        psycopg = None
    if psycopg is not None:
        for cls in (psycopg.Cursor,):
            original = cls.execute
            original_many = cls.executemany

            def execute(self, query, params=None, *a, _o=original, **kw):
                capture.raw(self, query, params)
                return _o(self, query, params, *a, **kw)

            def executemany(self, query, params_seq, *a, _o=original_many, **kw):
                capture.raw(self, query, None)
                return _o(self, query, params_seq, *a, **kw)

            cls.execute = execute
            cls.executemany = executemany
    try:
        import psycopg2
        import psycopg2.extensions
    except ImportError:
        return

    class Tapped(psycopg2.extensions.cursor):
        def execute(self, query, vars=None):
            capture.raw(self, query, vars)
            return super().execute(query, vars)

        def executemany(self, query, vars_list):
            capture.raw(self, query, None)
            return super().executemany(query, vars_list)

    connect = psycopg2.connect

    def tapped_connect(*a, **kw):
        kw.setdefault("cursor_factory", Tapped)
        return connect(*a, **kw)

    psycopg2.connect = tapped_connect


_CAPTURE = {}


def _install(capture, migrate_module):
    """The execute wrapper on every connection (those to come too), the driver's tap, and
    the pre/post_migrate phases."""
    from django.db import connections
    from django.db.backends.signals import connection_created

    installed = set()

    def install(sender=None, connection=None, **_kw):
        if id(connection) not in installed:
            installed.add(id(connection))
            connection.execute_wrappers.append(capture.wrapper)

    connection_created.connect(install, weak=False)
    for name in connections:
        install(connection=connections[name])
    _tap_drivers(capture)
    pre, post = migrate_module.emit_pre_migrate_signal, migrate_module.emit_post_migrate_signal

    def emit_pre(*a, **kw):
        capture.phase = "pre_migrate"
        try:
            return pre(*a, **kw)
        finally:
            capture.phase = "setup"

    def emit_post(*a, **kw):
        if not capture.post_migrate:  # a run `upgrade --online` goes on after: sent at its end
            return None
        capture.phase = "post_migrate"
        try:
            return post(*a, **kw)
        finally:
            capture.phase = "after"

    migrate_module.emit_pre_migrate_signal = emit_pre
    migrate_module.emit_post_migrate_signal = emit_post
