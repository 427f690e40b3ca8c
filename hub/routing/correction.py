"""Is the next message a correction of the agent's last reply? Pure, zero tokens.

People correct a reply in their very next message: "no, I meant the work list", "not
that, the other one", "wrong, it's on Friday". The router sees the message and the
window before it; when the message starts with one of these openings and the message
just before it is an agent's reply, that reply was a mistake worth a lesson.

Only the opening counts: "no milk this week, add bread", "not now", "no, thanks" or
"no, it's enough thanks" are answers, not corrections, so "no" needs a comma, colon or dash and then what was meant
("no, I meant ...", "no, the work list", "no, it's Friday"), or "I meant" right after it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from scopehub.memory import Message

__all__ = ["corrected_reply", "detect_correction", "is_correction"]

# What a polite "no" goes on with: "no, it's enough thanks", "no, that's fine", "no, all good".
_DECLINED = r"(?:enough|fine|ok|okay|alright|all\s+(?:right|good|set)|good|great|perfect|plenty)"

_OPENINGS = re.compile(
    r"""^\s*(?:
        (?:no|nope|nah)\s*[,:;.!–—-]+\s*(?!(?:(?:it|that)(?:'?s|\s+is)|i'?m)?\s*(?:just\s+)?_DECLINED\b)(?:i\s+(?:meant|mean|said|asked|wanted)\b|that'?s\s+not\b|not\b|wrong\b
            |it'?s\b|it\s+(?:is|was)\b|the\b|my\b)
      | (?:no|nope)\s+i\s+(?:meant|mean|said|asked|wanted)\b
      | i\s+(?:meant|said|asked\s+for)\b
      | not\s+(?:that|this|what\s+i\s+(?:meant|asked|said|wanted))\b
      | (?:that'?s|that\s+is|this\s+is)\s+(?:wrong|not\s+(?:right|it|what\s+i\s+(?:meant|asked|said|wanted)))\b
      | wrong\b\s*[,:;.!–—-]?
      | (?:incorrect|actually\s*,\s*i\s+meant)\b
    )""".replace("_DECLINED", _DECLINED),
    re.IGNORECASE | re.VERBOSE,
)


def is_correction(text: str) -> bool:
    """Whether ``text`` opens like a correction ("no, I meant ...", "not that, ...", "wrong, ...")."""
    return bool(text) and bool(_OPENINGS.match(text))


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
