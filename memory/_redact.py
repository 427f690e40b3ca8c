"""Secrets out of error texts before they are stored: a failed call keeps why it failed,
never the key it failed with.

Providers and HTTP clients put credentials into their messages ("Incorrect API key
provided: sk-proj-…", a URL with ``user:password@``, ``Authorization: Bearer …``). The
patterns below catch the usual shapes; the caller adds the exact values it knows (its
own API key, bot token, console token), which are replaced wherever they appear.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

__all__ = ["MAX_ERROR_CHARS", "REDACTED", "redact_secrets"]

REDACTED = "[redacted]"
MAX_ERROR_CHARS = 2000  # an error's message, as kept with its call
_MIN_KNOWN_CHARS = 6  # a shorter "secret" would blank out ordinary words

_PATTERNS = (
    # key=value and "key": "value" for the usual credential names.
    re.compile(
        r"(?i)((?:api[_-]?key|access[_-]?token|auth[_-]?token|token|secret|password|passwd|pwd|client[_-]?secret)"
        r"[\"']?\s*[:=]\s*[\"']?)([^\s\"',;&]+)"
    ),
    re.compile(r"(?i)(\b(?:bearer|basic)\s+)([A-Za-z0-9._~+/=-]{6,})"),  # Authorization headers
    re.compile(r"(?i)(\b[a-z][a-z0-9+.-]*://[^\s:/@]+:)([^\s@/]+)(@)"),  # credentials in a URL
    re.compile(r"()\b((?:sk|pk|rk)-[A-Za-z0-9_-]{8,}|xox[abprs]-[A-Za-z0-9-]{8,}|gh[pousr]_[A-Za-z0-9]{16,}|AIza[0-9A-Za-z_-]{20,})"),
    re.compile(r"()\b(\d{6,12}:[A-Za-z0-9_-]{30,})"),  # a Telegram bot token
    re.compile(r"()\b([A-Fa-f0-9]{32,}|[A-Za-z0-9+/_-]{40,}={0,2})"),  # any long opaque key
)


def redact_secrets(text: str, known: Iterable[str] = ()) -> str:
    """``text`` with every known secret and every credential-shaped run replaced by ``[redacted]``."""
    out = str(text)
    for secret in sorted({s for s in known if s and len(s) >= _MIN_KNOWN_CHARS}, key=len, reverse=True):
        out = out.replace(secret, REDACTED)
    for pattern in _PATTERNS:
        out = pattern.sub(lambda m: m.group(1) + REDACTED + (m.group(3) if m.lastindex and m.lastindex >= 3 else ""), out)
    return out
