"""Where things live under the maildir root, and how folder and file names are made.

Layout (``root`` is a parameter everywhere; the hub's settings call it HUB_MAILDIR)::

    <scope folder>/<agent or hub>/{tmp,new,cur}/   deliveries in
    outbox/<team>/{tmp,new,cur}/                   dispatches out (replies, hub dispatches)
    dlq/<scope folder>/<inbox>/<name>              rejected files, each with <name>.reason
    receipts/<scope folder>/<inbox>/<name>.json    one receipt per processed file
    recurring.json                                 period bookkeeping of recurring dispatches

Scope folders: ``user:42`` -> ``user-42``, ``group:-100123`` -> ``group--100123``. The kind
(``user`` or ``group``) and the id are joined by ``-``; in the id, ASCII letters, digits,
``_`` and ``-`` stay as they are and every other character is written as ``%XX`` per UTF-8
byte (so ``.``, ``/`` and ``%`` can never make a path). The kind has no ``-``, so the first
``-`` splits the folder name back into the scope: the encoding is reversible, and only the
canonical spelling is accepted when reading (``user-%342`` is not ``user:42``), so one
scope has exactly one folder.
"""

from __future__ import annotations

import hashlib
import os
import re
import secrets
import unicodedata
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import unquote

from scopehub.memory import InvalidScope, validate_scope

__all__ = [
    "HUB_INBOX",
    "MAX_FILE_BYTES",
    "PRIORITIES",
    "RESERVED",
    "STATE_FILE",
    "NameInfo",
    "check_name",
    "dispatch_name",
    "inbox_dir",
    "outbox_dir",
    "parse_name",
    "scope_folder",
    "scope_from_folder",
    "slugify",
    "stamp",
    "stored_name",
    "with_suffix",
]

HUB_INBOX = "hub"  # the inbox of the hub itself: the hub routes what lands there
PRIORITIES = ("urgent", "normal", "low")
PRIORITY_RANK = {name: rank for rank, name in enumerate(PRIORITIES)}
RESERVED = frozenset({"outbox", "dlq", "receipts"})  # top-level folders that are not scopes
STATE_FILE = "recurring.json"
MAX_FILE_BYTES = 1024 * 1024  # a dispatch file over 1 MiB goes to dlq/

# Agent, team and origin names: they become folder and file name parts.
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
_ID_SAFE = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")
_STAMP_FORMAT = "%Y-%m-%dT%H-%M-%SZ"
_NAME_PARTS = re.compile(
    r"^(?P<stamp>\d{4}-\d\d-\d\dT\d\d-\d\d-\d\dZ)_(?P<priority>urgent|normal|low)_"
    r"(?P<origin>[A-Za-z0-9][A-Za-z0-9._-]*)_(?P<slug>[a-z0-9-]+)(?:\.(?P<suffix>[a-z0-9]+))?\.md$"
)
_MAX_NAME_BYTES = 200  # leaves room for ".reason" / ".json" under the 255-byte limit


def check_name(value: object, what: str = "name") -> str:
    """Return ``value`` if it is a simple name (agent, team, origin), else raise ValueError."""
    if not isinstance(value, str) or not _NAME_RE.match(value):
        raise ValueError(
            f"{what} must be a simple name (letters, digits, '.', '_', '-', at most 64,"
            f" starting with a letter or digit), not {value!r}"
        )
    return value


def scope_folder(scope: str) -> str:
    """The folder name of ``scope``: ``user:42`` -> ``user-42``, ``group:-100`` -> ``group--100``."""
    validate_scope(scope)
    kind, _, ident = scope.partition(":")
    encoded = "".join(
        ch if ch in _ID_SAFE else "".join(f"%{byte:02X}" for byte in ch.encode("utf-8")) for ch in ident
    )
    folder = f"{kind}-{encoded}"
    if len(folder.encode()) > 255:
        raise ValueError(f"scope {scope!r} is too long for a folder name")
    return folder


def scope_from_folder(folder: str) -> str:
    """The scope a folder name stands for; ValueError unless it is a scope's canonical folder."""
    kind, sep, encoded = folder.partition("-")
    if not sep or kind not in ("user", "group"):
        raise ValueError(f"{folder!r} is not a scope folder (user-<id> or group-<id>)")
    try:
        scope = validate_scope(f"{kind}:{unquote(encoded, errors='strict')}")
    except (InvalidScope, UnicodeDecodeError) as exc:
        raise ValueError(f"{folder!r} is not a scope folder: {exc}") from None
    if scope_folder(scope) != folder:
        raise ValueError(f"{folder!r} is not the canonical folder of {scope!r}")
    return scope


def inbox_dir(root: Path, scope: str, inbox: str) -> Path:
    """``<root>/<scope folder>/<agent or hub>``: the Maildir of one inbox."""
    return Path(root) / scope_folder(scope) / check_name(inbox, "agent")


def outbox_dir(root: Path, team: str) -> Path:
    """``<root>/outbox/<team>``: the Maildir an outside team drains."""
    return Path(root) / "outbox" / check_name(team, "team")


def stamp(ts: float) -> str:
    """A UTC timestamp as it appears in file names: ``2026-01-31T14-30-00Z``."""
    return datetime.fromtimestamp(ts, UTC).strftime(_STAMP_FORMAT)


def iso(ts: float) -> str:
    """A UTC timestamp for front matter and receipts: ``2026-01-31T14:30:00Z``."""
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def slugify(text: str, *, default: str = "dispatch", limit: int = 40) -> str:
    """A file-name slug: ASCII lower case words joined by ``-`` (``Daily report!`` -> ``daily-report``)."""
    ascii_text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
    slug = re.sub(r"[^a-z0-9]+", "-", ascii_text.lower()).strip("-")
    slug = slug[:limit].rstrip("-")
    return slug or default


def dispatch_name(ts: float, priority: str, origin: str, slug: str, suffix: str | None = None) -> str:
    """``<UTC timestamp>_<priority>_<origin>_<slug>[.<suffix>].md``: ``ls`` is enough to triage."""
    if priority not in PRIORITY_RANK:
        raise ValueError(f"priority must be one of {', '.join(PRIORITIES)}, not {priority!r}")
    check_name(origin, "origin")
    tail = f".{suffix}" if suffix else ""
    return f"{stamp(ts)}_{priority}_{origin}_{slugify(slug)}{tail}.md"


def with_suffix(name: str, suffix: str | None = None) -> str:
    """``name`` with a short suffix before ``.md`` (random unless given), for uniqueness."""
    suffix = suffix or secrets.token_hex(3)
    base, dot, ext = name.rpartition(".")
    if not dot or "/" in ext or not base:
        return f"{name}.{suffix}"
    return f"{base}.{suffix}.{ext}"


@dataclass(frozen=True, slots=True)
class NameInfo:
    """What a conventional file name says: enough to order files without opening them."""

    created: float
    priority: str
    origin: str
    slug: str


def parse_name(name: str) -> NameInfo | None:
    """The parts of a conventional name, or None for any other name."""
    match = _NAME_PARTS.match(name)
    if not match:
        return None
    try:
        created = datetime.strptime(match["stamp"], _STAMP_FORMAT).replace(tzinfo=UTC).timestamp()
    except ValueError:
        return None
    return NameInfo(created, match["priority"], match["origin"], match["slug"])


def stored_name(name: str) -> str:
    """``name`` shortened (prefix + hash) when too long to take a ``.reason`` / ``.json`` beside it."""
    raw = os.fsencode(name)
    if len(raw) <= _MAX_NAME_BYTES:
        return name
    digest = hashlib.sha256(raw).hexdigest()[:12]
    prefix = raw[:150].decode("utf-8", "ignore")
    return f"{prefix}~{digest}"
