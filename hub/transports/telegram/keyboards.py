"""The inline keyboards the transport sends, and the callback data their buttons carry.

Callback data is ``"<kind>:<what>:<whose>"`` (at most 64 bytes): ``fa`` the confirmation of
``/forget all`` (whose: the user who asked), ``qa`` the answer to a yes-or-no question
(whose: who asked it, 0 in a group: the reply quotes them), ``st`` a ``/settings`` button.
:mod:`.buttons` checks and handles the presses.
"""

from __future__ import annotations

import re
from typing import Any

from telegram import InlineKeyboardButton, InlineKeyboardMarkup

from scopehub.hub.commands import LANGUAGES
from scopehub.memory import chat_settings

__all__ = ["ANSWER", "FORGET", "SETTING", "asks_yes_no", "forget_all_keyboard", "settings_keyboard", "yes_no_keyboard"]

FORGET, ANSWER, SETTING = "fa", "qa", "st"  # callback data: "<kind>:<what>:<whose>"

_QUESTION_START = re.compile(
    r"^(?:should|shall|do|does|did|is|are|was|were|can|could|would|will|may|have|has|want|ok|okay)\b", re.IGNORECASE
)
_ASKING = re.compile(
    r"\b(?:did you mean|do you want|would you like|shall i|should i|can i|may i|is that (?:right|correct|ok)|confirm)\b",
    re.IGNORECASE,
)


def asks_yes_no(text: str) -> bool:
    """Whether a reply ends with a yes-or-no question (English phrasing; "A or B?" is a choice, not one)."""
    lines = text.strip().splitlines()
    if not lines:
        return False
    sentence = re.split(r"(?<=[.!:])\s+", lines[-1].strip())[-1].strip()
    if not sentence.endswith("?") or re.search(r"\bor\b", sentence, re.IGNORECASE):
        return False
    return bool(_QUESTION_START.match(sentence) or _ASKING.search(sentence))


def forget_all_keyboard(user_id: int | None) -> InlineKeyboardMarkup:
    whose = user_id or 0
    return InlineKeyboardMarkup(
        [[InlineKeyboardButton("Erase everything", callback_data=f"{FORGET}:yes:{whose}"), InlineKeyboardButton("Cancel", callback_data=f"{FORGET}:no:{whose}")]]
    )


def yes_no_keyboard(asker: int) -> InlineKeyboardMarkup:
    return InlineKeyboardMarkup(
        [[InlineKeyboardButton("Yes", callback_data=f"{ANSWER}:y:{asker}"), InlineKeyboardButton("No", callback_data=f"{ANSWER}:n:{asker}")]]
    )


def settings_keyboard(hub: Any, scope: str) -> InlineKeyboardMarkup:
    """One button per agent (✅ answers here) and the languages; a press changes and shows again."""
    current = chat_settings(hub.store, scope)
    on = set(current.agents) if current.agents else set(hub.registry.names)
    agents = [InlineKeyboardButton(("✅ " if name in on else "▫️ ") + name, callback_data=f"{SETTING}:a:{name}"[:64]) for name in hub.registry.names]
    rows = [agents[i : i + 3] for i in range(0, len(agents), 3)]
    chosen = current.language
    languages = [
        InlineKeyboardButton(("• " if chosen == name else "") + name, callback_data=f"{SETTING}:l:{code}") for code, name in LANGUAGES.items()
    ]
    languages.append(InlineKeyboardButton(("• " if chosen is None else "") + "auto", callback_data=f"{SETTING}:l:-"))
    rows += [languages[i : i + 3] for i in range(0, len(languages), 3)]
    return InlineKeyboardMarkup(rows)
