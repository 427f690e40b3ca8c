"""When to offer the optional archive tool (``search_memory``): a pure, zero-token rule.

Every tool schema is paid on every call it is offered in, so ``search_memory`` is offered
only when the call may need what the context does not hold:

- the window is full: older messages exist that only the archive reaches;
- the message refers to the past ("last week", "what did I say", "that email",
  "remember", "again") or asks to look something up in what was said or kept.

An agent can ask for it on every call (``AgentSpec.offer_search = "always"``). A model
that calls ``search_memory`` when it was not offered still gets it run (the hub keeps it
runnable), so a miss costs a round, never the answer. ``agents-hub eval tools`` measures
how often the rule offers the tool when it was needed, and how often it is offered at all.
"""

from __future__ import annotations

import re

__all__ = ["refers_to_past", "wants_archive"]

# Cues that a message reaches back beyond what was just said. Kept to phrases: bare past
# tense ("I was hoping to book...") is how people are polite, not a reference.
_PAST_RE = re.compile(
    r"""\b(?:
        remember | remind\s+me\s+what | recall | forgot | forgotten
      | earlier | previously | previous | back\s+then | the\s+other\s+day
      | last\s+(?:time|week|month|year|night|weekend|monday|tuesday|wednesday|thursday|friday|saturday|sunday)
      | yesterday | ago
      | (?:you|i|we|he|she|they)\s+(?:said|told|mentioned|asked|sent|wrote|promised|agreed|decided|talked|discussed|booked|saved|noted)
      | (?:did|have|had)\s+(?:i|we|you)\s+(?:say|tell|mention|ask|send|write|save|note|book|agree|decide|talk)
      | (?:when|what|where|who|which|how)\s+(?:did|was|were|had)\b
      | (?:that|the|this)\s+(?:email|mail|message|note|conversation|chat|link|address|number|thing)\s+(?:from|about|you|i|we|he|she|they)
      | look\s+(?:it|that)\s+up | look\s+back | search | find\s+(?:my|the|that|our)\s+(?:note|email|message|mail)s?
    )\b""",
    re.IGNORECASE | re.VERBOSE,
)


def refers_to_past(text: str) -> bool:
    """Whether ``text`` reaches back to something said or kept earlier."""
    return bool(_PAST_RE.search(text))


def wants_archive(text: str, recent: int, window: int) -> bool:
    """Offer ``search_memory`` for this message? ``recent`` messages precede it in the window."""
    return (window > 0 and recent >= window) or refers_to_past(text)
