"""Maildir transport: outside programs drop files into the hub's inboxes and drain outboxes.

Layout under one root (a parameter everywhere; settings will call it HUB_MAILDIR)::

    <scope folder>/<agent or hub>/{tmp,new,cur}/   deliveries in ("hub": the hub routes it)
    outbox/<team>/{tmp,new,cur}/                   dispatches out: replies, hub dispatches
    dlq/<scope folder>/<inbox>/<name>[.reason]     rejected files, each with its reason
    receipts/<scope folder>/<inbox>/<name>.json    one receipt per processed file
    recurring.json                                 when each recurring dispatch last went

Scope folders: ``user:42`` -> ``user-42``, ``group:-100123`` -> ``group--100123``; other
characters of an id are ``%XX``-escaped (see :func:`scope_folder`), reversibly.

Files: YAML front matter (from, to, priority, created, subject, thread, reply_to, kind,
reply) and a Markdown body, named ``<UTC time>_<priority>_<origin>_<slug>.md``.
Writers write into ``tmp/`` and publish into ``new/`` atomically; the intake delivers
each file to the hub, then moves it to ``cur/``; nothing is deleted except by
:func:`erase_scope`.
"""

from __future__ import annotations

from .erase import erase_scope
from .files import Rejected
from .intake import (
    Deliver,
    Delivered,
    Dispatch,
    DrainReport,
    MaildirIntake,
    RetryLater,
    TokenBucket,
)
from .layout import (
    HUB_INBOX,
    PRIORITIES,
    dispatch_name,
    parse_name,
    scope_folder,
    scope_from_folder,
    slugify,
)
from .outbox import OutboxItem, ack_outbox, list_outbox, read_outbox
from .recurring import RecurringDispatch, due_recurring, load_recurring_state, send_due
from .send import dispatch_out, send_dispatch
from .status import InboxBacklog, backlog, dlq_count
from .watcher import MaildirWatcher

__all__ = [
    "HUB_INBOX",
    "PRIORITIES",
    "Deliver",
    "Delivered",
    "Dispatch",
    "DrainReport",
    "InboxBacklog",
    "MaildirIntake",
    "MaildirWatcher",
    "OutboxItem",
    "RecurringDispatch",
    "Rejected",
    "RetryLater",
    "TokenBucket",
    "ack_outbox",
    "backlog",
    "dispatch_name",
    "dispatch_out",
    "dlq_count",
    "due_recurring",
    "erase_scope",
    "list_outbox",
    "load_recurring_state",
    "parse_name",
    "read_outbox",
    "scope_folder",
    "scope_from_folder",
    "send_dispatch",
    "send_due",
    "slugify",
]
