"""Signatures, sessions and the brake on token guessing.

- :class:`Signer`: one HMAC-SHA256 key per process for everything the console signs: CSRF
  tokens (bound to the session, the action, the scope and the row, all *decoded* values,
  so the form and the check can never disagree on an encoding), session cookies and the
  "done" notices a write action redirects to.
- :class:`Sessions`: a login opens a session; the cookie holds its random id, its expiry
  and their signature, never the token. The server keeps the live ids, so logging out
  (or the expiry) ends a session even if its cookie is replayed.
- :class:`LoginBrake`: failed tokens are counted per client and overall; past the limit
  every try is refused unread until the window has passed, so guessing runs at a few
  tries a minute instead of thousands.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
import threading
import time
from collections import deque
from collections.abc import Callable

__all__ = ["LoginBrake", "Sessions", "Signer"]


class Signer:
    """HMAC-SHA256 over a list of values: the same values always give the same signature."""

    def __init__(self, secret: bytes) -> None:
        self._key = hashlib.sha256(b"agents-hub console\0" + secret).digest()

    def sign(self, *parts: object) -> str:
        message = json.dumps([str(part) for part in parts], ensure_ascii=False, separators=(",", ":"))
        return hmac.new(self._key, message.encode("utf-8"), hashlib.sha256).hexdigest()

    def check(self, signature: str, *parts: object) -> bool:
        return hmac.compare_digest(signature.encode("utf-8", "replace"), self.sign(*parts).encode("ascii"))


class Sessions:
    """Live sessions of this process: id -> expiry. Thread-safe (pages run in a thread pool)."""

    def __init__(self, signer: Signer, lifetime_s: float, *, clock: Callable[[], float] = time.time) -> None:
        self.signer = signer
        self.lifetime_s = lifetime_s
        self.clock = clock
        self._live: dict[str, float] = {}
        self._lock = threading.Lock()

    def open(self) -> str:
        """A new session; returns its cookie value (``id.expiry.signature``)."""
        now = self.clock()
        sid, expires = secrets.token_urlsafe(18), int(now + self.lifetime_s)
        with self._lock:
            self._live = {k: v for k, v in self._live.items() if v > now}  # drop the expired ones
            self._live[sid] = expires
        return f"{sid}.{expires}.{self.signer.sign('session', sid, expires)}"

    def check(self, cookie: str | None) -> str | None:
        """The session id of a valid, live, unexpired cookie; None otherwise."""
        if not cookie or cookie.count(".") != 2:
            return None
        sid, expires, signature = cookie.split(".")
        if not self.signer.check(signature, "session", sid, expires):
            return None
        with self._lock:
            live = self._live.get(sid)
        return sid if live is not None and str(live) == expires and live > self.clock() else None

    def close(self, sid: str) -> None:
        """End a session (logout): its cookie is refused from now on."""
        with self._lock:
            self._live.pop(sid, None)


class LoginBrake:
    """At most ``per_client`` failed tokens per client and ``overall`` in all per ``window_s``."""

    def __init__(
        self, *, per_client: int = 5, overall: int = 50, window_s: float = 60.0, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.per_client, self.overall, self.window_s, self.clock = per_client, overall, window_s, clock
        self._by_client: dict[str, deque[float]] = {}
        self._all: deque[float] = deque()
        self._lock = threading.Lock()

    def _trim(self, times: deque[float], now: float) -> None:
        while times and times[0] <= now - self.window_s:
            times.popleft()

    def wait(self, client: str) -> float:
        """Seconds until ``client`` may try a token again (0: now)."""
        now = self.clock()
        with self._lock:
            mine = self._by_client.get(client, deque())
            self._trim(mine, now)
            self._trim(self._all, now)
            waits = [times[0] + self.window_s - now for times, limit in ((mine, self.per_client), (self._all, self.overall)) if len(times) >= limit]
        return max(waits, default=0.0)

    def failed(self, client: str) -> None:
        """Count one wrong token of ``client``."""
        now = self.clock()
        with self._lock:
            self._by_client.setdefault(client, deque()).append(now)
            self._all.append(now)
            if len(self._by_client) > 10_000:  # many addresses: forget those with nothing recent
                for name in [c for c, times in self._by_client.items() if not times or times[-1] <= now - self.window_s]:
                    del self._by_client[name]
