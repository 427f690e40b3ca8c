"""Memory: the SQLite store of messages and their routes, facts, vault, tasks,
reminders and token records, and the archive search over them.

Imports nothing of ours.
"""

from ._chatlog import ImportReport, LogRecord, parse_ts, read_chatlog, write_chatlog
from ._model import CallRecord, Message, NewMessage, Usage, validate_scope
from ._schema import SCHEMA_VERSION
from ._store import Store
from .errors import InvalidRecord, InvalidScope, StoreError

__all__ = [
    "SCHEMA_VERSION",
    "CallRecord",
    "ImportReport",
    "InvalidRecord",
    "InvalidScope",
    "LogRecord",
    "Message",
    "NewMessage",
    "Store",
    "StoreError",
    "Usage",
    "parse_ts",
    "read_chatlog",
    "validate_scope",
    "write_chatlog",
]
