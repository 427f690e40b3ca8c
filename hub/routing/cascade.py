"""The routing cascade: which agent answers a message, and whose messages it may also read.

Pure functions over plain data, replayed millions of times by the evaluation: an explicit
``/agent`` or ``@agent`` → a reply to an agent's message → the local classifier (zero LLM
tokens, sticky for follow-ups). The optional LLM router (:mod:`.llm_router`) sits after
these and falls back to the local decision.

Conversation state decides more than the words: a message stays with the current agent
unless another one wins by ``switch_margin`` times the classifier's typical margin (half
that after "also", "too" said later; twice it after "also", "außerdem", "et aussi", "y también"
opening the message, one more of the same); an English message with no known content word never switches; and the
current thread's user messages are weighed together, so a thread that opened ambiguously
moves to the agent its follow-ups point at. The English shortcuts apply only to text the
lexicon reads (:func:`.lexicon.readable`): another language is decided by the scores
(embeddings, character n-grams of examples in that language) and the margin.
"""

from __future__ import annotations

import math
import re
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass

from scopehub.hub.routing.also_sees import predict_also_sees
from scopehub.hub.routing.classifier import REQUEST_SHAPES, LocalClassifier, shape_features
from scopehub.hub.routing.lexicon import adds_something, opens_addition, readable, switch_cue
from scopehub.memory import Message


@dataclass(frozen=True, slots=True)
class Route:
    """Where a message goes: the agent, who else's messages it may read, and how we decided."""

    agent: str
    also_sees: tuple[str, ...] = ()
    via: str = "local"  # explicit | reply | local | sticky | llm | default
    text: str | None = None  # the message without its /agent or @agent address, when one was used
    confidence: float = 1.0


_EXPLICIT_RE = re.compile(r"^\s*/([A-Za-z][\w-]{0,31})(?:@\w+)?(?:\s+|$)(.*)$", re.S)
_MENTION_RE = re.compile(r"(?<![\w@])@([A-Za-z][\w-]{0,31})\b")


def detect_explicit(text: str, agents: Iterable[str]) -> tuple[str, str] | None:
    """``(agent, remaining text)`` when the message addresses an agent by ``/agent`` or ``@agent``."""
    names = {name.lower(): name for name in agents}
    match = _EXPLICIT_RE.match(text)
    if match and match.group(1).lower() in names:
        return names[match.group(1).lower()], match.group(2).strip()
    for mention in _MENTION_RE.finditer(text):
        name = mention.group(1).lower()
        if name in names:
            rest = (text[: mention.start()] + text[mention.end() :]).strip()
            return names[name], re.sub(r"\s{2,}", " ", rest)
    return None


def current_agent(window: Sequence[Message]) -> str | None:
    """The agent of the conversation's current thread: the newest tagged user message's tag."""
    for message in reversed(window):
        if message.role == "user" and message.agent:
            return message.agent
    return None


def route(
    text: str,
    *,
    classifier: LocalClassifier,
    window: Sequence[Message] = (),
    reply_to: Message | None = None,
    tail: int = 4,
    default_also_sees: dict[str, tuple[str, ...]] | None = None,
    agents: Collection[str] | None = None,
    now: float | None = None,
) -> Route:
    """Route one message: explicit address → reply → sticky local classifier.

    ``window`` is the scope's recent messages before this one (oldest first). ``agents``:
    the only agents that may answer here (a chat's own choice); None: every agent. An
    address to, a reply to, or a thread of another agent is then decided by the scores.
    ``now`` (unix seconds) is when this message came: after :data:`SESSION_GAP_S` of
    silence no agent holds the conversation any more, and the message is routed as a first one.
    """
    defaults = default_also_sees or {}
    allowed = [name for name in classifier.agents if agents is None or name in agents] or list(classifier.agents)
    default_agent = classifier.default_agent if classifier.default_agent in allowed else allowed[0]
    new_session = opens_session(window, now)

    def choose(evidence: dict[str, float], current: str | None) -> tuple[str, str, float]:
        allowed_evidence = {name: value for name, value in evidence.items() if name in allowed}
        return _choose(allowed_evidence, current, window, classifier, text, default_agent)

    def finish(agent: str, via: str, confidence: float, routed_text: str | None = None) -> Route:
        also = predict_also_sees(routed_text if routed_text is not None else text, agent, window, classifier, tail=tail, new_session=new_session)
        merged = tuple(dict.fromkeys((*defaults.get(agent, ()), *also)))
        merged = tuple(name for name in merged if name != agent)
        return Route(agent=agent, also_sees=merged, via=via, text=routed_text, confidence=confidence)

    explicit = detect_explicit(text, allowed)
    if explicit is not None:
        agent, rest = explicit
        return finish(agent, "explicit", 1.0, rest)

    if reply_to is not None and reply_to.role == "agent" and reply_to.agent in allowed:
        return finish(reply_to.agent, "reply", 1.0)

    current = current_agent(window)
    if current not in allowed or new_session:
        current = None
    if current is not None and readable(text) and not classifier.has_content(text):
        # No content words (or none we know) in a language the lexicon reads: a follow-up
        # never switches. Text in another language is left to the scores and the margin.
        # Its evidence is weighed with the thread's if a later message turns (see
        # _thread_choice): scored now, a later message never pays for several embeddings.
        if classifier.semantic is not None and not classifier.words_decide_leaving(text, current):
            classifier.evidence(text)
        return finish(current, "sticky", 0.0)
    if current is not None and classifier.words_decide_leaving(text, current):
        # The words decide whether the message leaves its agent; the embedding may then
        # only hold it back, so it is asked only when the words would move it.
        agent, via, confidence = choose(classifier.lexical_evidence(text), current)
        if agent != current:
            agent, via, confidence = choose(classifier.evidence_for(text, current), current)
        else:
            other = classifier.agreed_switch(text, current, _cue(text, classifier, window))
            if other is not None and other in allowed:
                agent, via, confidence = other, "local", _confidence(classifier.evidence(text), other)
        return finish(agent, via, confidence)
    agent, via, confidence = choose(classifier.evidence(text), current)
    return finish(agent, via, confidence)


def opens_session(window: Sequence[Message], now: float | None) -> bool:
    """Whether a message sent at ``now`` opens a new conversation: the window's last message
    is over :data:`SESSION_GAP_S` older (no agent holds the conversation any more)."""
    return bool(now is not None and window and now - window[-1].ts > SESSION_GAP_S)


def _choose(
    evidence: dict[str, float], current: str | None, window: Sequence[Message], classifier: LocalClassifier, text: str, default_agent: str
) -> tuple[str, str, float]:
    """(agent, via, confidence) the classifier's ``evidence`` gives, from ``current``'s side."""
    if not evidence:
        return (current, "sticky", 0.0) if current else (default_agent, "default", 0.0)
    best = max(evidence, key=evidence.__getitem__)
    cue = _cue(text, classifier, window)
    threshold = classifier.switch_threshold_for(text, current)
    if cue == ADDITION_FACTOR and current is not None and not REQUEST_SHAPES.intersection(shape_features(text)):
        # "und den Müll rausbringen" after an addition: one more of the same in any language; the
        # margin is not shrunk for words the lexicon cannot read (a keyword of another agent's,
        # "Müll", would otherwise take it). A request of its own ("Außerdem muss ich ...") is weighed as before.
        threshold = max(threshold, classifier.switch_threshold)
    margin = threshold * cue
    shapes = REQUEST_SHAPES.intersection(shape_features(text))
    if current is not None and best != current and shapes and all(classifier.shape_leader(shape) == best for shape in shapes):
        # "Tengo que enviar la copia del DNI" after a Spanish email: a request shape of its own
        # (a duty, something done, a move, a reply asked for ...) whose examples are the leader's
        # needs half the margin to leave; the words of the email it speaks of hold it otherwise.
        margin *= SHAPE_MARGIN
    if current is not None and best != current and evidence[best] - evidence[current] < margin:
        # Stay unless another agent wins by a clear margin (log-odds): most turns are follow-ups.
        best = current
    if current is not None and best == current:
        # The thread so far may say better than its first message whom it is for ("find me a
        # movie" → movies, then "rent it with subtitles" → media): weigh its user messages.
        corrected = _thread_choice(evidence, current, window, classifier, text)
        if corrected != current:
            return corrected, "local", _confidence(evidence, corrected)
        return current, "sticky", _confidence(evidence, current)
    confidence = _confidence(evidence, best)
    if confidence < classifier.min_confidence:
        return (current, "sticky", confidence) if current else (default_agent, "default", confidence)
    return best, "local", confidence


# How much more a message opening with "also" ("und außerdem", "et aussi", "y también") must
# win by to leave the agent holding the conversation: it adds one more of what that agent
# does ("also email the insurer" after a task was added). A clear request elsewhere ("also
# remind me at 9 to ...", "also tell the sales team ...") wins by three times the margin.
ADDITION_FACTOR = 2.0
# The share of the switch margin a message with a request shape of the winning agent's needs.
SHAPE_MARGIN = 0.5


def _cue(text: str, classifier: LocalClassifier, window: Sequence[Message] = ()) -> float:
    """The factor on the switch margin a cue in ``text`` gives: one more of the same after an
    addition or a duty holds the conversation (:data:`ADDITION_FACTOR`); otherwise an "also",
    "too" announces a new errand."""
    if opens_addition(text) and adds_something(_last_user_text(window)):
        return ADDITION_FACTOR
    return classifier.cue_factor if switch_cue(text) else 1.0


def _last_user_text(window: Sequence[Message]) -> str:
    return next((message.text for message in reversed(window) if message.role == "user"), "")


def _confidence(evidence: dict[str, float], agent: str) -> float:
    peak = max(evidence.values())
    return math.exp(evidence[agent] - peak) / sum(math.exp(value - peak) for value in evidence.values())


# Silence after which a message opens a new conversation: no agent holds it any more (its
# words and embedding decide as for a first message). Half an hour, the usual inactivity
# timeout of a session; not tuned (the datasets' dialogues carry no time of day).
SESSION_GAP_S = 1800.0
THREAD_MESSAGES = 6  # user messages of the current thread weighed for a correction


def _thread_choice(evidence: dict[str, float], current: str, window: Sequence[Message], classifier: LocalClassifier, text: str) -> str:
    """The agent the current thread's user messages (and this one) favour by the switch margin."""
    totals = dict(evidence)
    counted = 0
    for message in reversed(window):
        if message.role != "user":
            continue
        if message.agent != current or counted >= THREAD_MESSAGES:
            break
        counted += 1
        for agent, value in classifier.thread_evidence(message.text, current).items():
            if agent in totals:  # an agent this chat does not use is not counted
                totals[agent] += value
    if not counted:
        return current
    best = max(totals, key=totals.__getitem__)
    return best if totals[best] - totals[current] >= classifier.switch_threshold_for(text, current) else current
