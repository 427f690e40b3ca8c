"""Errors raised by the memory store.

The hub's documented error tree (``hub.errors``) re-exports these; memory imports
nothing of ours, so its errors live here.
"""

from __future__ import annotations

__all__ = [
    "AlreadyDone",
    "DuplicateMessage",
    "InvalidEvent",
    "InvalidRecord",
    "InvalidScope",
    "StoreError",
    "StoreUnavailable",
    "UnknownEventType",
]


class StoreError(Exception):
    """Base class for everything the memory store raises."""


class StoreUnavailable(StoreError):
    """The database cannot be reached right now (a restart, an outage): nothing was done;
    the same call may succeed a moment later. Transports answer "try again" (HTTP 503)."""


class InvalidScope(StoreError, ValueError):
    """A scope string is not ``user:<id>`` or ``group:<id>``."""


class InvalidRecord(StoreError, ValueError):
    """A chat-log line or a message could not be understood; the message says which and why."""


class DuplicateMessage(StoreError):
    """A message with this (scope, external id) is already stored."""


class InvalidEvent(InvalidRecord):
    """An event payload does not fit its type's model; the message names the type and the field."""


class UnknownEventType(InvalidEvent):
    """An event names a type nobody registered; the message names it."""


class AlreadyDone(StoreError):
    """A compare-and-set found the work done by another worker meanwhile (feedback already
    learnt): nothing was written."""
