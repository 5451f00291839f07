# mypy: ignore-errors
# (runs in the project's interpreter, beside its Django: not typed against ours)
"""The runner's connection half (loaded by path by `__main__.py`; the standard library and
Django only): the target's connection fields put into `DATABASES[alias]`, Django set up and
pointed at another database or none, and the process ended when queueguard is done."""

import os
import sys
import threading

#: where an alias that must not be reached points (a socket directory that does not exist:
#: a connection fails at once, loudly)
REFUSED_HOST = "/nonexistent/queueguard-refused"
#: the project's own libpq `options` of each DATABASES entry, kept across overrides
_OWN_OPTIONS = {}
#: the setup message, for a later change of the session's settings (a longer lock_timeout)
GIVEN = {}


def _override(databases, alias, given):
    """The connection fields of DATABASES[alias] replaced by the target's, in place (the
    connection handler may hold this very dict); every other alias refused."""
    if alias not in databases:
        raise SystemExit(f"DATABASES has no alias {alias!r} (it has {sorted(databases)})")
    entry = databases[alias]
    for key in ("NAME", "USER", "PASSWORD", "HOST", "PORT"):
        entry[key] = given["fields"].get(key, "")
    options = entry.setdefault("OPTIONS", {})
    own = _OWN_OPTIONS.setdefault(id(entry), options.get("options", ""))
    libpq = dict(given["libpq"])
    dsn_options = libpq.pop("options", "")
    options.update(libpq)
    extra = " ".join(f"-c {k}={v}" for k, v in given["settings"].items())
    joined = f"{own} {dsn_options} {extra}"
    options["options"] = " ".join(joined.split())
    options["application_name"] = given["nonce"]
    for other, entry_other in databases.items():
        if other != alias:
            entry_other["HOST"] = REFUSED_HOST
            entry_other["PORT"] = ""


def _close_all(connections):
    """Every connection closed, and every pool of Django's psycopg backend (`OPTIONS`'
    "pool", Django 5.1+) closed and forgotten: a pool keeps the connection settings it was
    made with, so the next connection after a change (another database, new session
    settings, a new nonce) must come from a new one. The pools are the backend class's,
    shared by every thread."""
    connections.close_all()
    for alias in connections:
        pools = getattr(type(connections[alias]), "_connection_pools", None)
        if pools and alias in pools:
            pools.pop(alias).close()


def reconfigure(settings_changed):
    """The session settings of the next connections changed (every open one is closed)."""
    from django.conf import settings
    from django.db import connections

    GIVEN["settings"] = {**GIVEN["settings"], **settings_changed}
    _override(settings.DATABASES, GIVEN["alias"], GIVEN)
    _override(connections.settings, GIVEN["alias"], GIVEN)
    _close_all(connections)


def setup(channel, message):
    GIVEN.update(message)
    os.environ["DJANGO_SETTINGS_MODULE"] = message["module"]
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    from django.conf import settings

    _override(settings.DATABASES, message["alias"], message)
    import django

    django.setup()
    from django.db import connections

    # a settings module that computes DATABASES late (in an app's ready()) or a connection
    # opened at import: override again wherever the handler reads, and reconnect
    _override(settings.DATABASES, message["alias"], message)
    _override(connections.settings, message["alias"], message)
    _close_all(connections)
    connection = connections[message["alias"]]
    from django.core.management import get_commands

    migrate_app = get_commands().get("migrate")
    pid = None
    if message.get("connect") and connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_backend_pid()")
            pid = cursor.fetchone()[0]
    channel.send(
        ev="ready",
        django=django.get_version(),
        engine=connection.settings_dict["ENGINE"],
        vendor=connection.vendor,
        editor=f"{connection.SchemaEditorClass.__module__}.{connection.SchemaEditorClass.__name__}",
        migrate=migrate_app if isinstance(migrate_app, str) else type(migrate_app).__module__,
        pid=pid,
        aliases=sorted(connections.settings),
    )


def retarget(channel, message):
    """The alias pointed at another database (or none), its session settings replaced: one
    runner serves a command's every database (queueguard checks the nonce there again)."""
    from django.conf import settings
    from django.db import connections

    GIVEN.update({k: message[k] for k in ("fields", "libpq", "settings", "nonce")})
    _override(settings.DATABASES, GIVEN["alias"], GIVEN)
    _override(connections.settings, GIVEN["alias"], GIVEN)
    _close_all(connections)
    pid = None
    if message.get("connect"):
        with connections[GIVEN["alias"]].cursor() as cursor:
            cursor.execute("SELECT pg_backend_pid()")
            pid = cursor.fetchone()[0]
    channel.send(ev="ready", pid=pid)


def quit(channel):
    """Done: the connections closed, then the process ends as soon as the project's exit
    handlers have run. The interpreter's own teardown of everything Django loaded (a tenth of
    a second for a small project) is skipped — unless a thread of the project's is still
    running, which a normal exit waits for."""
    if "django.db" in sys.modules:
        from django.db import connections

        _close_all(connections)
    channel.send(ev="bye")
    if any(
        t.is_alive() and not t.daemon
        for t in threading.enumerate()
        if t is not threading.main_thread()
    ):
        return
    import atexit

    atexit._run_exitfuncs()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
