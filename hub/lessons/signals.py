"""What a piece of feedback says, before any model reads it: positive, negative or neutral.

Zero tokens. A Telegram reaction is one emoji (Telegram offers a fixed set); a
``/feedback`` text or a correction is words. The signal decides the lesson's kind and
importance when no model is there to do it (fail-open), and is shown with the feedback.
"""

from __future__ import annotations

import re

from scopehub.hub.routing.correction import is_correction

__all__ = ["NEGATIVE_REACTIONS", "POSITIVE_REACTIONS", "reaction_signal", "text_signal"]

# Telegram's reaction emoji, by what they say about a reply; the others (🤔, 😱, 👀...) say nothing sure.
POSITIVE_REACTIONS = frozenset(
    {
        "👍", "❤", "🔥", "🥰", "👏", "😁", "🎉", "🤩", "🙏", "👌", "😍", "❤\u200d🔥",
        "💯", "🤣", "⚡", "🏆", "🤝", "🤗", "🫡", "😘", "😎", "🆒", "💘", "😇",
    }
)
NEGATIVE_REACTIONS = frozenset(
    {
        "👎", "🤬", "😢", "🤮", "💩", "🤡", "🥱", "💔", "🤨", "🖕", "😭", "😡",
        "😐", "🥴",
    }
)

_NEGATIVE_WORDS = re.compile(
    r"\b(?:wrong|incorrect|not\s+what|bad|useless|mistake|didn'?t|don'?t|doesn'?t|isn'?t|wasn'?t|never|missed|forgot|"
    r"should\s+have|shouldn'?t|instead|no)\b",
    re.IGNORECASE,
)
_POSITIVE_WORDS = re.compile(
    r"\b(?:thanks?|thank\s+you|great|perfect|good|exactly|love|correct|right|nice|helpful|well\s+done|spot\s+on)\b",
    re.IGNORECASE,
)


def _plain(emoji: str) -> str:
    # Telegram may send ❤️ (with the emoji variation selector) or ❤; compare without it.
    return emoji.replace("\ufe0f", "").strip()


def reaction_signal(emoji: str) -> str | None:
    """``positive``, ``negative``, or None for a reaction that says nothing sure about the reply."""
    plain = _plain(emoji)
    if plain in {_plain(e) for e in POSITIVE_REACTIONS}:
        return "positive"
    if plain in {_plain(e) for e in NEGATIVE_REACTIONS}:
        return "negative"
    return None


def text_signal(text: str) -> str:
    """``negative`` for a correction or complaint, ``positive`` for praise, else ``neutral``."""
    if is_correction(text) or _NEGATIVE_WORDS.search(text):
        return "negative"
    if _POSITIVE_WORDS.search(text):
        return "positive"
    return "neutral"
