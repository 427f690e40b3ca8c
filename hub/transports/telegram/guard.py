"""A guard around update parsing: one update python-telegram-bot cannot read never stops the others.

PTB parses a whole ``getUpdates`` batch at once; when one update fails (a poll without
``persistent_id``, as a self-hosted Bot API server older than 9.6 sends it, raises
``TypeError``), the batch is dropped, the offset never moves past it, and the updater asks
for the same batch again at once: thousands of getUpdates a second, and no chat answered
again. :class:`GuardedBot` reads each update on its own and puts a bare update with only
its ``update_id`` (and :data:`UNREADABLE_KEY` saying why) in place of one it cannot read,
so the offset moves on; :class:`UnreadableUpdateHandler` hands those to the transport,
which keeps them (``rejected_updates``) and logs one line. The webhook server does the same
for a body it cannot read, and answers 200: sending it again could not help.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from telegram import Bot, Update
from telegram.ext import BaseHandler, ExtBot

__all__ = [
    "UNREADABLE_KEY",
    "GuardedBot",
    "UnreadableUpdateHandler",
    "body_text",
    "describe_unreadable",
    "read_update",
    "readable_update",
    "unreadable_placeholder",
]

log = logging.getLogger(__name__)

UNREADABLE_KEY = "hub_unreadable"  # on a placeholder: {"reason": ..., "body": the update as it came}


def unreadable_placeholder(data: dict[str, Any], exc: BaseException) -> dict[str, Any]:
    """The bare update that stands for ``data``: its id, and why it could not be read."""
    reason = f"{type(exc).__name__}: {' '.join(str(exc).split())[:300]}"
    return {"update_id": data["update_id"], UNREADABLE_KEY: {"reason": reason, "body": data}}


def readable_update(data: Any, bot: Bot) -> Any:
    """``data`` when PTB can read it; else its placeholder (:func:`unreadable_placeholder`).

    An update without an integer ``update_id`` is left as it is: nothing can confirm it.
    """
    if not isinstance(data, dict) or not isinstance(data.get("update_id"), int):
        return data
    try:
        Update.de_json(data, bot)
    except Exception as exc:
        return unreadable_placeholder(data, exc)
    return data


def read_update(data: dict[str, Any], bot: Bot) -> Update:
    """``data`` read as an Update, or its placeholder's Update when PTB cannot read it.

    The same result as ``Update.de_json(readable_update(data, bot), bot)``, reading a
    readable update once instead of twice (the webhook reads every update this way).
    """
    try:
        return Update.de_json(data, bot)
    except Exception as exc:
        return Update.de_json(unreadable_placeholder(data, exc), bot)


class GuardedBot(ExtBot[Any]):
    """PTB's ExtBot whose getUpdates reads each update on its own (see the module docstring)."""

    async def _post(self, endpoint: str, data: dict[str, Any] | None = None, **kwargs: Any) -> Any:
        result = await super()._post(endpoint, data, **kwargs)
        if endpoint == "getUpdates" and isinstance(result, list):
            return [readable_update(item, self) for item in result]
        return result


class UnreadableUpdateHandler(BaseHandler[Update, Any, None]):
    """Matches only the placeholders of updates that could not be read."""

    def check_update(self, update: object) -> bool:
        return isinstance(update, Update) and UNREADABLE_KEY in (update.api_kwargs or {})


def describe_unreadable(update: Update) -> tuple[str, dict[str, Any]]:
    """``(reason, the update as it came)`` of a placeholder."""
    info = update.api_kwargs[UNREADABLE_KEY]
    return str(info.get("reason", "unreadable")), info.get("body") if isinstance(info.get("body"), dict) else {}


def body_text(body: dict[str, Any]) -> str:
    """The update as JSON text, for the operator."""
    return json.dumps(body, ensure_ascii=False, default=str)
