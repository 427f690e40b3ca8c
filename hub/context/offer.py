"""When to offer the optional tools (``search_memory``, ``team``): pure, zero-token rules.

Every tool schema is paid on every call it is offered in, so ``search_memory`` is offered
only when the call may need what the context does not hold:

- the window is full: older messages exist that only the archive reaches;
- the message refers to the past ("last week", "what did I say", "that email",
  "remember", "again") or asks to look something up in what was said or kept.

An agent can ask for it on every call (``AgentSpec.offer_search = "always"``). A model
that calls ``search_memory`` when it was not offered still gets it run (the hub keeps it
runnable), so a miss costs a round, never the answer. ``agents-hub eval tools`` measures
how often the rule offers the tool when it was needed, and how often it is offered at all.

The hub's ``team`` tool (talk channels; the agent's own lessons, goals and plans) costs
about 175 tokens a call, more than most agents' own tools, so the built-in agents are
offered it only when :func:`wants_team` says this call may use it:

- the awareness block shows the agent unread messages of its channels (it may answer);
- the person corrects or criticises the last reply ("no, I meant the work list", "that's
  wrong"): a moment to record a lesson;
- the message talks about the team, a channel, another agent, a lesson, a goal or a plan
  ("tell the team...", "let the notes agent know", "from now on...", "what's your plan").

Agents that declare a channel, or ``team_tool=True``, get it on every call. Like
``search_memory``, the tool stays runnable when it was not offered.
"""

from __future__ import annotations

import re

from scopehub.hub.routing.correction import is_correction

__all__ = ["refers_to_past", "talks_to_team", "wants_archive", "wants_team"]

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


# Cues that a message is about the team's talk or the agent's own memory. Phrases, not single
# words a booking or a to-do says anyway ("plan a trip", "the team meeting at 3").
_TEAM_RE = re.compile(
    r"""\b(?:
        (?:tell|ask|let|inform|notify|warn|remind|update)\s+(?:the\s+)?(?:team|others|other\s+agents?|everyone|\w+\s+agent)\b
      | (?:let|tell)\s+\w+\s+know\b.*\b(?:agents?|team)\b
      | (?:team|the\s+\w+)\s+channel | channels?
      | (?:post|pin|share)\s+(?:it|this|that)\s+(?:to|in|with)\s+(?:the\s+)?(?:team|channel|others)
      | other\s+agents? | the\s+agents | your\s+team(?:mates)?
      | lessons? | learn\s+from | remember\s+(?:this|that)\s+for\s+next\s+time
      | from\s+now\s+on | next\s+time | (?:never|don'?t|do\s+not|stop)\s+(?:do|doing|say|saying|make|making)\s+(?:that|this|it)\s+again
      | you\s+(?:got\s+it\s+wrong|were\s+wrong|misunderstood|keep\s+(?:doing|getting|making))
      | (?:your|the\s+agent'?s?)\s+(?:goals?|plans?|progress)
      | (?:goal|plan)\s+\#?\d+ | (?:set|add|update|abandon|drop|mark)\s+(?:a|the|your|my)\s+(?:goal|plan)
    )\b | (?:^|\s)\#[a-z][\w-]*""",
    re.IGNORECASE | re.VERBOSE,
)


def talks_to_team(text: str) -> bool:
    """Whether ``text`` is about the team, its channels, or an agent's lessons, goals or plans."""
    return bool(_TEAM_RE.search(text))


def wants_team(text: str, *, channel_news: bool = False) -> bool:
    """Offer the ``team`` tool for this message? ``channel_news``: the call shows unread channel lines."""
    return channel_news or is_correction(text) or talks_to_team(text)
