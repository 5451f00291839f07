"""Connection strings: validation, redaction and the application_name every host sets."""

from __future__ import annotations

import re

from psycopg import conninfo

from queueguard.errors import InvalidDsn

_URL_PASSWORD = re.compile(r"(?P<scheme>postgres(?:ql)?://)(?P<user>[^:@/?#]*):(?P<pw>[^@/?#]*)@")
# `sslpassword` too; an unterminated quoted value runs to the end (libpq rejects it, but the
# DSN is still echoed in the error and must not leak the words after a space).
_PARAM_PASSWORD = re.compile(
    r"(?P<key>\b(?:ssl)?password\s*=\s*)(?P<pw>'(?:[^'\\]|\\.)*(?:'|\\?$)|\S+)"
)
_QUERY_PASSWORD = re.compile(r"(?P<key>[?&](?:ssl)?password=)(?P<pw>[^&#]*)")

#: PostgreSQL truncates application_name to 63 bytes.
APPLICATION_NAME_LIMIT = 63


def validate(dsn: str) -> str:
    """Return `dsn` if libpq can parse it; raise InvalidDsn (without echoing a password)."""
    if not dsn or not dsn.strip():
        raise InvalidDsn("empty DSN")
    try:
        conninfo.conninfo_to_dict(dsn)
    except Exception as exc:
        raise InvalidDsn(f"malformed DSN {redact(dsn)!r}: {redact(str(exc))}") from None
    return dsn


def redact(text: str) -> str:
    """Hide every password in a DSN (URL or key=value form) or in a message quoting one."""
    text = _URL_PASSWORD.sub(lambda m: f"{m['scheme']}{m['user']}:***@", text)
    text = _PARAM_PASSWORD.sub(lambda m: f"{m['key']}***", text)
    return _QUERY_PASSWORD.sub(lambda m: f"{m['key']}***", text)


def application_name(protocol: int, host_id: str) -> str:
    """`queueguard/<protocol> host=<id>`, cut at PostgreSQL's 63-byte limit on a char boundary."""
    name = f"queueguard/{protocol} host={host_id}"
    encoded = name.encode("utf-8")[:APPLICATION_NAME_LIMIT]
    return encoded.decode("utf-8", errors="ignore")


def params(dsn: str) -> dict[str, str]:
    """The DSN's non-empty connection parameters (URL or key=value form, parsed by libpq:
    the one DSN parser; InvalidDsn when it cannot be parsed)."""
    found = conninfo.conninfo_to_dict(validate(dsn))
    return {key: str(value) for key, value in found.items() if value}


def with_params(dsn: str, **params: str) -> str:
    """Return `dsn` with extra connection parameters (they win over the DSN's own)."""
    return conninfo.make_conninfo(validate(dsn), **params)


def with_search_path(dsn: str, schema: str) -> str:
    """`dsn` whose sessions start with `search_path` = `schema` alone (a startup option added
    to the DSN's own `options`; libpq's backslash escapes keep a space or backslash in it)."""
    quoted = '"' + schema.replace('"', '""') + '"'
    escaped = quoted.replace("\\", "\\\\").replace(" ", "\\ ")
    options = params(dsn).get("options", "")
    return with_params(dsn, options=f"{options} -c search_path={escaped}".strip())
