"""Small wording helpers the hub's replies, the Telegram bot and the CLI share.

They sit below every module that writes text for people (commands, budgets, the CLI,
the transports), so that those can use them without importing one another.
"""

from __future__ import annotations

__all__ = ["plural"]


def plural(count: int, singular: str, many: str | None = None) -> str:
    """``"1 fact"``, ``"3 facts"``, ``"0 facts"``; ``many`` for irregular plurals."""
    return f"{count:,} {singular if count == 1 else (many or singular + 's')}"
