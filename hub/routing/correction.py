"""Is the next message a correction of the agent's last reply? Pure, zero tokens.

People correct a reply in their very next message: "no, I meant the work list", "not
that, the other one", "wrong, it's on Friday". The router sees the message and the
window before it; when the message starts with one of these openings and the message
just before it is an agent's reply, that reply was a mistake worth a lesson.

Only the opening counts: "no milk this week, add bread", "not now", "no, thanks" or
"no, it's enough thanks" are answers, not corrections, so "no" needs a comma, colon or dash and then what was meant
("no, I meant ...", "no, the work list", "no, it's Friday"), or "I meant" right after it.
The openings of each language are in :data:`lexicon.CORRECTIONS`; the same care holds
there ("Nein, danke", "No, gracias", "Нет, спасибо" are answers).
"""

from __future__ import annotations

from collections.abc import Sequence

from scopehub.hub.routing.lexicon import correction_opening
from scopehub.memory import Message

__all__ = ["corrected_reply", "detect_correction", "is_correction"]

def is_correction(text: str) -> bool:
    """Whether ``text`` opens like a correction in its language ("no, I meant ...", "not
    that, ...", "wrong, ...", "Nein, ich meinte ...", "Нет, я имел в виду ...")."""
    return bool(text) and correction_opening(text) is not None


def corrected_reply(window: Sequence[Message]) -> Message | None:
    """The agent reply a correction would be about: the newest message before it, if an agent wrote it.

    Chat commands in between (``/help``) are skipped; anything else means the person
    moved on, so nothing is corrected.
    """
    for message in reversed(window):
        if message.via == "command" or (message.role == "agent" and message.agent == "hub"):
            continue
        return message if message.role == "agent" and message.agent else None
    return None


def detect_correction(text: str, window: Sequence[Message]) -> Message | None:
    """The agent reply ``text`` corrects, when it opens like a correction right after one; else None."""
    if not is_correction(text):
        return None
    return corrected_reply(window)
