"""Forgetting a scope everywhere the hub keeps it: the store (every table, scrubbed from
the file) and the files of the Maildir (inboxes, dead letters, receipts, outbox replies).

``/forget all`` and ``agents-hub forget`` both come here, so neither can miss a place.
"""

from __future__ import annotations

import logging

from scopehub.hub.settings import Settings, maildir_root
from scopehub.memory import MemoryStore

__all__ = ["erase_scope_everywhere"]

log = logging.getLogger(__name__)


def erase_scope_everywhere(store: MemoryStore, settings: Settings, scope: str) -> dict[str, int]:
    """Erase ``scope`` from the store and the Maildir; rows and files removed, by kind."""
    removed = dict(store.erase(scope))
    root = maildir_root(settings)
    if root.exists():
        from scopehub.hub.transports.maildir import erase_scope

        removed.update({f"maildir_{kind}": count for kind, count in erase_scope(root, scope).items()})
    return removed
