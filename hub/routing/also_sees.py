"""``also_sees``: other agents whose recent messages this message refers to.

Predicted locally, with zero tokens: named domains, names only another agent's messages
hold, back-references ("the same day", "there", "in the area", "dort", "там": one list
per language in :mod:`.lexicon`), and a thread's first also_sees kept for its next two
messages.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from rapidfuzz import fuzz, process

from scopehub.hub.routing.classifier import LocalClassifier
from scopehub.hub.routing.lexicon import PAIR_WORDS, back_reference, content_terms, readable
from scopehub.memory import Message


def _recent_other_agents(window: Sequence[Message], agent: str) -> list[str]:
    """Other agents of the window's user messages, most recent first."""
    seen: dict[str, None] = {}
    for message in reversed(window):
        if message.role == "user" and message.agent and message.agent != agent:
            seen.setdefault(message.agent)
    return list(seen)


# Follow-ups of a thread that keep the also_sees its first message needed. Each one carried
# costs history tokens on every thread that needed another agent: MultiWOZ val (frozen part
# left out), chain 3, predicted routes, 5 parts of the chats, 0 / 1 / 2 / 3 carried:
# references kept 97.8% / 98.9% / 100% / 100% at a history saving of 60.0% / 57.4% / 55.8%
# / 55.1%; with 2, one part saved 54.3%, with 1 every part 56.0% or more. SGD dev: 75.6% /
# 76.4% / 76.7% at 35.8% / 33.7% / 32.3%.
CARRY_MESSAGES = 1
_TYPO_CUTOFF = 88  # rapidfuzz ratio: "attractinon" names "attraction" (95), "hotels" is a stem away


def _named(naming: frozenset[str], message_terms: set[str]) -> set[str]:
    """The naming terms a message uses, a typo allowed in words of six letters or more."""
    found = set(naming & message_terms)
    for term in message_terms - found:
        if len(term) >= 6:
            match = process.extractOne(term, naming, scorer=fuzz.ratio, score_cutoff=_TYPO_CUTOFF)
            if match is not None:
                found.add(match[0])
    return found


def predict_also_sees(
    text: str,
    agent: str,
    window: Sequence[Message],
    classifier: LocalClassifier,
    *,
    tail: int = 4,
    new_session: bool = False,
) -> tuple[str, ...]:
    """Other agents whose recent messages this message refers to.

    A message refers to agent B when it names B's domain ("that email", "the
    restaurant"); when it shares a specific word with B's messages that the routed agent
    cannot already see (a word no agent's profile uses, such as a name, or one only B's
    profile uses: a restaurant's name among the restaurant agent's examples); when it
    points back without naming anything ("the same day", "a cab there", "a hotel in the
    area", "between the two") — then B is the agent the conversation was with just
    before (the two before, for "both" and "between"); and when the thread's previous
    message already read B ("book a taxi from the hotel" → "at 5pm, please"), unless
    this one opens a ``new_session`` (it starts a thread of its own).
    """
    others = _recent_other_agents(window, agent)
    others += [name for name in dict.fromkeys(m.agent for m in reversed(window)) if name and name != agent and name not in others]
    if not others:
        return ()
    message_terms = set(content_terms(text))
    chosen: set[str] = set()
    naming: set[str] = set()
    for other in others:
        words = _named(classifier.naming_terms(other), message_terms)
        if words:
            chosen.add(other)
            naming |= words
    tail_ids = {m.id for m in window[-tail:]} if tail > 0 else set()
    visible_terms: set[str] = set()
    hidden_count: dict[str, Counter[str]] = {}
    for message in window:
        words = set(content_terms(message.text))
        if message.agent == agent or message.id in tail_ids:
            visible_terms |= words
        elif message.agent:
            hidden_count.setdefault(message.agent, Counter()).update(words)
    if naming:
        # "leave the hotel": whoever's messages talk about a hotel (a misrouted one too).
        chosen.update(m.agent for m in window if m.agent and m.agent != agent and naming & set(content_terms(m.text)))
    # A name seen in one or two hidden messages of another agent (asked and answered)
    # points at them: one no profile uses ("Pizza Hut", "Ram"), or one only that agent's
    # profile uses ("Cocum" among the restaurant agent's examples).
    candidates = {term for term in message_terms - visible_terms if len(term) >= 4 and not term.isdigit() and classifier.agents_using(term) <= 1}
    for other, counts in hidden_count.items():
        if other == agent or other in chosen:
            continue
        for term in candidates:
            if 0 < counts[term] <= 3 and (not classifier.agents_using(term) or term in classifier.profile_terms(other)):
                chosen.add(other)
                break
    if not chosen:
        match = back_reference(text)
        if match:
            recent = _recent_other_agents(window, agent) or others
            # Small talk rarely holds what "the same day" points at; a specialist does.
            recent = [name for name in recent if name != classifier.default_agent] or recent
            chosen.update(recent[: 2 if match.group(0).lower() in PAIR_WORDS else 1])
    # A thread that needed another agent's messages still does for its next few messages
    # ("book a taxi from the hotel" → "at 5pm, please"), then it has what it needs.
    carried = 0
    inherited: tuple[str, ...] = ()
    for message in reversed(window if not new_session else ()):
        if message.role != "user":
            continue
        if message.agent != agent or not message.also_sees or (inherited and message.also_sees != inherited):
            break
        inherited = message.also_sees
        carried += 1
    if inherited and carried <= CARRY_MESSAGES and (classifier.has_content(text) or not readable(text)):
        chosen.update(name for name in inherited if name in others)
    chosen.discard(agent)
    return tuple(sorted(chosen))
