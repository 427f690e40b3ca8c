"""PostgreSQL URLs whose password may hold any character: built, normalised, redacted.

libpq reads ``postgresql://user:password@host:port/dbname?options`` with the user and
password percent-encoded. People paste passwords as they are, and a raw ``@``, ``/``,
``#`` or ``%`` then breaks the URL: ``p@ss`` makes ``ss@host`` the host name, ``a/b``
makes ``u`` the host and ``a`` the port, ``50%off`` is refused as a bad escape.

:func:`normalise_url` encodes what must be encoded and leaves a valid URL as it is. The
user information ends at the *last* ``@`` of the URL (a host never holds one), so any
character may appear in the password; a ``%`` followed by two hexadecimal digits is
taken as an escape already made (``p%40ss`` stays the password ``p@ss``). The only URL
it cannot read as meant is one whose query string holds an ``@``: percent-encode that
one by hand, or leave the password out and set ``PGPASSWORD`` (libpq reads it).
"""

from __future__ import annotations

import re
from urllib.parse import quote

__all__ = ["database_url", "normalise_url", "redact_url"]

_SCHEME = re.compile(r"^(?P<scheme>postgres(?:ql)?://)(?P<rest>.*)$", re.IGNORECASE | re.DOTALL)
_ESCAPE = re.compile(r"%[0-9A-Fa-f]{2}")
# Characters that may stand unencoded in a URL's user information (RFC 3986 unreserved
# and sub-delims, minus ':' which separates the user from the password).
_SAFE = "-._~!$&'()*+,;="


def _encode(part: str) -> str:
    """``part`` percent-encoded for the user information, keeping escapes already made."""
    out: list[str] = []
    i = 0
    while i < len(part):
        if _ESCAPE.match(part, i):
            out.append(part[i : i + 3])
            i += 3
            continue
        out.append(quote(part[i], safe=_SAFE))
        i += 1
    return "".join(out)


def _split(url: str) -> tuple[str, str | None, str | None, str] | None:
    """``(scheme://, user, password, host-and-rest)``; None when ``url`` is no PostgreSQL URL."""
    match = _SCHEME.match(url)
    if match is None:
        return None
    rest = match["rest"]
    at = rest.rfind("@")
    if at < 0:
        return match["scheme"], None, None, rest
    userinfo, tail = rest[:at], rest[at + 1 :]
    user, colon, password = userinfo.partition(":")
    return match["scheme"], user, password if colon else None, tail


def normalise_url(url: str) -> str:
    """``url`` with its user and password percent-encoded as libpq expects (see the module docstring)."""
    parts = _split(url)
    if parts is None or parts[1] is None:
        return url
    scheme, user, password, tail = parts
    userinfo = _encode(user or "") + ("" if password is None else ":" + _encode(password))
    return f"{scheme}{userinfo}@{tail}"


def redact_url(url: str) -> str:
    """The URL with its password replaced by ``***`` (for messages and logs), whatever it holds."""
    parts = _split(url)
    if parts is None or parts[2] is None:
        return url
    scheme, user, _password, tail = parts
    return f"{scheme}{_encode(user or '')}:***@{tail}"


def database_url(
    *, user: str, password: str | None = None, host: str = "localhost", port: int | None = None, dbname: str = "", **options: str
) -> str:
    """A PostgreSQL URL from its parts, every part encoded (deploy scripts, benches, tests)."""
    userinfo = quote(user, safe="") + ("" if password is None else ":" + quote(password, safe=""))
    hostpart = f"[{host}]" if ":" in host and not host.startswith("[") else quote(host, safe="")
    if port is not None:
        hostpart += f":{int(port)}"
    query = "&".join(f"{quote(k, safe='')}={quote(str(v), safe='')}" for k, v in options.items())
    return f"postgresql://{userinfo}@{hostpart}/{quote(dbname, safe='')}" + (f"?{query}" if query else "")
