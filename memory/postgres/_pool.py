"""Connections to one PostgreSQL server for many threads: cheap checkouts, fast failure, fast recovery.

Why not psycopg_pool: its checks and its reconnection are the two things a worker must
not do. ``check=check_connection`` sends a round trip on every checkout (30-40 per
message); and when the server is gone, every checkout waits the pool's whole timeout
(30 s, on the event loop), while reconnection backs off exponentially, so service came
back up to 18 s after the server did.

Here:

* **Checkout costs no round trip.** A connection is checked locally when it is taken: its
  status, and whether the server wrote to it while it sat idle (a server that shuts down
  or restarts closes its connections, which makes the socket readable). Only then, or
  after :data:`IDLE_CHECK` seconds idle (a silent network drop), does a real round trip
  decide. A connection returned broken or mid-transaction is closed, never reused.
* **Down means fail at once.** When a connection attempt fails, the pool is *down*: every
  checkout that would need a new connection raises :class:`StoreUnavailable` at once
  (no waiting), and so do callers waiting for a busy connection.
* **Back means back at once.** While down, a thread tries to connect every
  :data:`PROBE_INTERVAL` seconds; its first success ends the outage for everyone.
"""

from __future__ import annotations

import logging
import select
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from typing import Any

import psycopg
from psycopg import pq

from ..errors import StoreUnavailable

__all__ = ["IDLE_CHECK", "PROBE_INTERVAL", "Pool"]

log = logging.getLogger(__name__)

IDLE_CHECK = 60.0  # seconds a connection may sit idle before a round trip checks it
PROBE_INTERVAL = 0.5  # seconds between connection attempts while the server is down


class Pool:
    """Up to ``max_size`` connections to ``conninfo``, shared by threads (see the module docstring)."""

    def __init__(
        self,
        conninfo: str,
        *,
        max_size: int = 10,
        wait_timeout: float = 30.0,
        connect_timeout: float = 5.0,
        kwargs: dict[str, Any] | None = None,
        configure: Callable[[psycopg.Connection], None] | None = None,
        redacted: str = "",
    ) -> None:
        if max_size < 1:
            raise ValueError("max_size must be at least 1")
        self.conninfo = conninfo
        self.max_size = max_size
        self.wait_timeout = wait_timeout
        self.connect_timeout = max(2, round(connect_timeout))  # libpq's minimum is 2 s
        self.kwargs = dict(kwargs or {})
        self.configure = configure
        self.redacted = redacted or "the database"
        self._idle: list[tuple[psycopg.Connection, float]] = []  # most recently returned last
        self._size = 0  # open connections: idle and in use, and those being opened
        self._cond = threading.Condition()
        self._closed = False
        self._down_since: float | None = None  # monotonic time of the failed attempt that began the outage
        self._down_reason = ""
        self._prober: threading.Thread | None = None
        self.outages = 0  # how many times the pool went down (for benches and logs)

    # -- state ------------------------------------------------------------------------------
    @property
    def down_for(self) -> float | None:
        """Seconds since the server was found unreachable; None while it answers."""
        since = self._down_since
        return None if since is None else time.monotonic() - since

    def stats(self) -> dict[str, Any]:
        with self._cond:
            return {"size": self._size, "idle": len(self._idle), "down_for": self.down_for, "outages": self.outages}

    # -- checkout ---------------------------------------------------------------------------
    @contextmanager
    def connection(self) -> Iterator[psycopg.Connection]:
        """A connection for the ``with`` block, given back (or discarded when broken) at its end."""
        conn = self.getconn()
        try:
            yield conn
        finally:
            self.putconn(conn)

    def getconn(self) -> psycopg.Connection:
        """An open connection: an idle one that passes the local check, else a new one.

        Raises :class:`StoreUnavailable` at once while the server is down, and after
        ``wait_timeout`` seconds when every connection stays busy.
        """
        deadline = time.monotonic() + self.wait_timeout
        while True:
            with self._cond:
                while True:
                    if self._closed:
                        raise StoreUnavailable(f"the connection pool of {self.redacted} is closed")
                    if self._idle:
                        conn, returned = self._idle.pop()
                        break
                    if self._down_since is not None:
                        raise self._unavailable()
                    if self._size < self.max_size:
                        self._size += 1  # reserved: opened below, outside the lock
                        conn, returned = None, 0.0
                        break
                    left = deadline - time.monotonic()
                    if left <= 0:
                        raise StoreUnavailable(
                            f"all {self.max_size} connections to {self.redacted} stayed busy for {self.wait_timeout:.0f} s"
                        )
                    self._cond.wait(left)
            if conn is None:
                return self._open()
            if self._usable(conn, returned):
                return conn
            self._discard(conn)

    def putconn(self, conn: psycopg.Connection) -> None:
        """Give ``conn`` back; a broken one, or one left inside a transaction, is closed instead."""
        healthy = not conn.closed and conn.pgconn.status == pq.ConnStatus.OK
        if healthy and conn.info.transaction_status != pq.TransactionStatus.IDLE:
            healthy = False  # never hand on a connection in an unknown transaction state
        if not healthy:
            self._discard(conn)
            return
        with self._cond:
            if self._closed:
                self._size -= 1
                conn.close()
                return
            self._idle.append((conn, time.monotonic()))
            self._cond.notify()

    def close(self) -> None:
        with self._cond:
            self._closed = True
            idle, self._idle = self._idle, []
            self._size -= len(idle)
            self._cond.notify_all()
        for conn, _ in idle:
            conn.close()

    # -- internals ----------------------------------------------------------------------------
    def _connect(self) -> psycopg.Connection:
        conn = psycopg.connect(self.conninfo, connect_timeout=self.connect_timeout, **self.kwargs)
        if self.configure is not None:
            self.configure(conn)
        return conn

    def _open(self) -> psycopg.Connection:
        """Open the connection reserved in ``getconn``; a failure starts an outage."""
        try:
            conn = self._connect()
        except psycopg.Error as exc:
            with self._cond:
                self._size -= 1
                self._go_down(exc)
                error = self._unavailable()
            raise error from exc
        except BaseException:
            with self._cond:
                self._size -= 1
                self._cond.notify()
            raise
        return conn

    def _usable(self, conn: psycopg.Connection, returned: float) -> bool:
        """The local check (no round trip), and a round trip only when it has a doubt."""
        if conn.closed or conn.pgconn.status != pq.ConnStatus.OK:
            return False
        try:
            readable, _, _ = select.select([conn.pgconn.socket], [], [], 0)
        except (OSError, ValueError):
            return False
        if not readable and time.monotonic() - returned < IDLE_CHECK:
            return True
        # The server wrote to an idle connection (usually to close it), or it sat idle long:
        # one round trip tells.
        try:
            conn.execute("")
        except psycopg.Error:
            return False
        return True

    def _discard(self, conn: psycopg.Connection) -> None:
        with suppress(Exception):  # a broken connection may fail to close cleanly; it is gone either way
            conn.close()
        with self._cond:
            self._size -= 1
            self._cond.notify()

    def _unavailable(self) -> StoreUnavailable:
        return StoreUnavailable(f"PostgreSQL at {self.redacted} is unavailable ({self._down_reason}); try again shortly")

    def _go_down(self, exc: BaseException) -> None:
        """Called with the lock held: the server is unreachable; fail everyone fast, probe for its return."""
        reason = " ".join(str(exc).split())[:200] or type(exc).__name__
        self._down_reason = reason
        if self._down_since is not None:
            return
        self._down_since = time.monotonic()
        self.outages += 1
        log.warning("PostgreSQL at %s is unavailable (%s); requests fail fast until it is back", self.redacted, reason)
        self._cond.notify_all()  # waiters for a busy connection learn it now, not at their timeout
        if self._prober is None or not self._prober.is_alive():
            self._prober = threading.Thread(target=self._probe, name="pg-pool-probe", daemon=True)
            self._prober.start()

    def _probe(self) -> None:
        """While down: try to connect every PROBE_INTERVAL; the first success ends the outage."""
        while True:
            time.sleep(PROBE_INTERVAL)
            with self._cond:
                if self._closed or self._down_since is None:
                    return
                self._size += 1
            try:
                conn = self._connect()
            except psycopg.Error as exc:
                with self._cond:
                    self._size -= 1
                    self._down_reason = " ".join(str(exc).split())[:200] or type(exc).__name__
                continue
            except BaseException:
                with self._cond:
                    self._size -= 1
                raise
            with self._cond:
                lasted = time.monotonic() - (self._down_since or time.monotonic())
                self._down_since = None
                self._down_reason = ""
                # Idle connections from before the outage are dead: the local check finds them,
                # but dropping them now spares the first requests a discard each.
                stale, self._idle = self._idle, []
                self._size -= len(stale)
                if self._closed:
                    self._size -= 1
                    conn.close()
                else:
                    self._idle.append((conn, time.monotonic()))
                self._cond.notify_all()
            for old, _ in stale:
                with suppress(Exception):
                    old.close()
            log.warning("PostgreSQL at %s is back after %.1f s", self.redacted, lasted)
            return
