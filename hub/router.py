"""The router: which agent answers a message, and whose recent messages it may also read.

Pure functions over plain data, replayed millions of times by the evaluation. The
cascade: an explicit ``/agent`` or ``@agent`` → a reply to an agent's message → the
local classifier (zero LLM tokens, sticky for follow-ups). The optional LLM router
(``hub.llm_router``) sits after these and falls back to the local decision.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from rapidfuzz import fuzz, process

from memory import Message

from ._text import STOPWORDS, content_terms, terms

__all__ = ["AgentProfile", "LocalClassifier", "Route", "detect_explicit", "predict_also_sees", "route"]

DEFAULT_AGENT = "general"


@dataclass(frozen=True, slots=True)
class Route:
    """Where a message goes: the agent, who else's messages it may read, and how we decided."""

    agent: str
    also_sees: tuple[str, ...] = ()
    via: str = "local"  # explicit | reply | local | sticky | llm | default
    text: str | None = None  # the message without its /agent or @agent address, when one was used
    confidence: float = 1.0


@dataclass(frozen=True, slots=True)
class AgentProfile:
    """What the router knows of an agent: its name, description and example utterances."""

    name: str
    description: str = ""
    examples: tuple[str, ...] = ()
    keywords: tuple[str, ...] = ()  # extra domain nouns ("email", "mail") that name the agent


_EXPLICIT_RE = re.compile(r"^\s*/([A-Za-z][\w-]{0,31})(?:@\w+)?(?:\s+|$)(.*)$", re.S)
_MENTION_RE = re.compile(r"(?<![\w@])@([A-Za-z][\w-]{0,31})\b")
# "that email", "the restaurant", "this hotel": a noun phrase pointing back at earlier content.
_DEICTIC_RE = re.compile(r"\b(?:that|this|those|these|the|same)\s+(\w+)")


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


class LocalClassifier:
    """Zero-token scorer: naive Bayes over descriptions and examples, plus fuzzy example match.

    Built once per agent set; ``scores`` is cheap (a few terms × a few agents).
    """

    def __init__(
        self,
        profiles: Sequence[AgentProfile],
        *,
        default_agent: str = DEFAULT_AGENT,
        switch_margin: float = 0.2,
        min_confidence: float = 0.0,
        fuzzy_weight: float = 0.35,
    ) -> None:
        if not profiles:
            raise ValueError("the router needs at least one agent")
        self.profiles = tuple(profiles)
        self.agents = tuple(profile.name for profile in profiles)
        self.default_agent = default_agent if default_agent in self.agents else self.agents[0]
        self.switch_margin = switch_margin
        self.min_confidence = min_confidence
        self.fuzzy_weight = fuzzy_weight
        self._build()

    def _build(self) -> None:
        counts: dict[str, Counter[str]] = {}
        for profile in self.profiles:
            counter: Counter[str] = Counter()
            name_terms = content_terms(profile.name.replace("_", " "))
            for term in name_terms:
                counter[term] += 3
            for term in content_terms(" ".join(profile.keywords)):
                counter[term] += 2
            counter.update(content_terms(profile.description))
            for example in profile.examples:
                counter.update(set(content_terms(example)))
            counts[profile.name] = counter
        vocabulary = set().union(*counts.values()) if counts else set()
        alpha = 0.1
        self._loglik: dict[str, list[float]] = {}
        for term in vocabulary:
            row = []
            for name in self.agents:
                counter = counts[name]
                total = sum(counter.values()) or 1
                row.append(math.log((counter[term] + alpha) / (total + alpha * len(vocabulary))))
            # Centre each row so unseen-elsewhere terms carry evidence and shared ones don't.
            mean = sum(row) / len(row)
            self._loglik[term] = [value - mean for value in row]
        self._domain_terms = {name: frozenset(counts[name]) for name in self.agents}
        self._examples: list[str] = []
        self._example_agent: list[int] = []
        for index, profile in enumerate(self.profiles):
            for example in profile.examples:
                self._examples.append(example.lower())
                self._example_agent.append(index)
        # Terms that name an agent's domain (its name and keywords): used for also_sees.
        self._naming_terms = {
            profile.name: frozenset(content_terms(profile.name.replace("_", " ")) + content_terms(" ".join(profile.keywords)))
            for profile in self.profiles
        }

    def known_terms(self, text: str) -> list[str]:
        """Content terms of ``text`` that the classifier has evidence for."""
        return [term for term in content_terms(text) if term in self._loglik]

    def referenced_agents(self, text: str) -> set[str]:
        """Agents whose domain the message points back to ("that email", "the restaurant").

        Only meaningful when the message also names another domain: "book a taxi to the
        restaurant" is a taxi request that refers to the restaurant.
        """
        named = {agent for agent in self.agents if self.names_domain(content_terms(text), agent)}
        if len(named) < 2:
            return set()
        referenced = set()
        for match in _DEICTIC_RE.finditer(text.lower()):
            term_stems = content_terms(match.group(1))
            for agent in named:
                if self.names_domain(term_stems, agent):
                    referenced.add(agent)
        # If everything named is a back-reference, nothing is: keep the scoring as it is.
        return referenced if referenced != named else set()

    def scores(self, text: str) -> dict[str, float]:
        """A probability-like score per agent (sums to about 1); empty when no evidence."""
        known = self.known_terms(text)
        referenced = self.referenced_agents(text) if known else set()
        if referenced:
            naming = set().union(*(self._naming_terms[agent] for agent in referenced))
            known = [term for term in known if term not in naming] or known
        if not known:
            return {}
        totals = [0.0] * len(self.agents)
        for term in known:
            for index, value in enumerate(self._loglik[term]):
                totals[index] += value
        peak = max(totals)
        exp = [math.exp(value - peak) for value in totals]
        norm = sum(exp)
        posterior = [value / norm for value in exp]
        if self._examples and self.fuzzy_weight > 0:
            fuzzy = [0.0] * len(self.agents)
            for _, score, index in process.extract(
                text.lower(), self._examples, scorer=fuzz.token_set_ratio, limit=8, score_cutoff=40
            ):
                agent_index = self._example_agent[index]
                fuzzy[agent_index] = max(fuzzy[agent_index], score / 100.0)
            fuzzy_norm = sum(fuzzy)
            if fuzzy_norm > 0:
                posterior = [
                    (1 - self.fuzzy_weight) * p + self.fuzzy_weight * f / fuzzy_norm
                    for p, f in zip(posterior, fuzzy, strict=True)
                ]
        return dict(zip(self.agents, posterior, strict=True))

    def names_domain(self, text_terms: Iterable[str], agent: str) -> bool:
        """Whether the message names ``agent``'s domain ("that email", "the restaurant")."""
        naming = self._naming_terms.get(agent, frozenset())
        return any(term in naming for term in text_terms)


def current_agent(window: Sequence[Message]) -> str | None:
    """The agent of the conversation's current thread: the newest tagged user message's tag."""
    for message in reversed(window):
        if message.role == "user" and message.agent:
            return message.agent
    return None


def predict_also_sees(
    text: str,
    agent: str,
    window: Sequence[Message],
    classifier: LocalClassifier,
    *,
    tail: int = 4,
) -> tuple[str, ...]:
    """Other agents whose recent messages this message refers to.

    A message refers to agent B when it names B's domain ("that email", "the
    restaurant") or shares distinctive words with B's messages in the window that the
    routed agent cannot already see.
    """
    message_terms = set(content_terms(text))
    if not message_terms:
        return ()
    others = {m.agent for m in window if m.agent and m.agent != agent}
    if not others:
        return ()
    visible_terms: set[str] = set()
    by_agent: dict[str, set[str]] = {}
    tail_ids = {m.id for m in window[-tail:]} if tail > 0 else set()
    for message in window:
        words = set(content_terms(message.text))
        if message.agent == agent or message.id in tail_ids:
            visible_terms |= words
        elif message.agent:
            by_agent.setdefault(message.agent, set()).update(words)
    chosen = []
    for other in sorted(others):
        if classifier.names_domain(message_terms, other):
            chosen.append(other)
            continue
        shared = (message_terms & by_agent.get(other, set())) - visible_terms
        # Digits-only terms (times, counts) are too common to point at one agent.
        if any(len(term) >= 4 and not term.isdigit() and term not in STOPWORDS for term in shared):
            chosen.append(other)
    return tuple(chosen)


def route(
    text: str,
    *,
    classifier: LocalClassifier,
    window: Sequence[Message] = (),
    reply_to: Message | None = None,
    tail: int = 4,
    default_also_sees: dict[str, tuple[str, ...]] | None = None,
) -> Route:
    """Route one message: explicit address → reply → sticky local classifier.

    ``window`` is the scope's recent messages before this one (oldest first).
    """
    defaults = default_also_sees or {}

    def finish(agent: str, via: str, confidence: float, routed_text: str | None = None) -> Route:
        also = predict_also_sees(routed_text if routed_text is not None else text, agent, window, classifier, tail=tail)
        merged = tuple(dict.fromkeys((*defaults.get(agent, ()), *also)))
        merged = tuple(name for name in merged if name != agent)
        return Route(agent=agent, also_sees=merged, via=via, text=routed_text, confidence=confidence)

    explicit = detect_explicit(text, classifier.agents)
    if explicit is not None:
        agent, rest = explicit
        return finish(agent, "explicit", 1.0, rest)

    if reply_to is not None and reply_to.role == "agent" and reply_to.agent in classifier.agents:
        return finish(reply_to.agent, "reply", 1.0)

    current = current_agent(window)
    if current not in classifier.agents:
        current = None
    scores = classifier.scores(text)
    if not scores:
        # No content words (or none we know): a follow-up never switches.
        if current is not None:
            return finish(current, "sticky", 0.0)
        return finish(classifier.default_agent, "default", 0.0)
    best = max(scores, key=scores.__getitem__)
    if current is not None and best != current and scores[best] - scores[current] < classifier.switch_margin:
        return finish(current, "sticky", scores[current])
    if scores[best] < classifier.min_confidence:
        return finish(current or classifier.default_agent, "sticky" if current else "default", scores[best])
    return finish(best, "local", scores[best])


@dataclass
class RouterStats:
    """Counters the evaluation reads (kept outside the pure functions)."""

    by_via: Counter[str] = field(default_factory=Counter)

    def add(self, decision: Route) -> None:
        self.by_via[decision.via] += 1


def words(text: str) -> list[str]:
    """All word tokens (exported for the LLM router's prompt trimming)."""
    return terms(text)
