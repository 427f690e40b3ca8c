"""The agents of a routing evaluation: a profile per dataset domain, its examples chosen
from the training dialogues, its description from the schema or the slot names."""

from __future__ import annotations

import contextlib
import math
import zlib
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from scopehub.hub.routing import (
    DEFAULT_AGENT,
    AgentProfile,
)

from ..loaders import Dialogue

if TYPE_CHECKING:
    from ..holdout import Holdout

MAX_EXAMPLES = 50
GENERAL = DEFAULT_AGENT


def stable_hash(text: str) -> int:
    return zlib.crc32(text.encode("utf-8"))


def sample_examples(candidates: Iterable[tuple[str, str]], *, per_agent: int = MAX_EXAMPLES) -> dict[str, list[str]]:
    """At most ``per_agent`` example texts per agent from ``(agent, text)`` candidates.

    Deterministic and order-independent: candidates are visited in stable-hash order and
    picked greedily for the words they add to what the agent's examples already cover, so
    fifty examples span as many ways of asking as they can (a plain random sample spends
    many of them on the most common phrasing). Duplicates are dropped.
    """
    from scopehub.hub.routing.lexicon import content_terms

    by_agent: dict[str, dict[str, None]] = defaultdict(dict)
    for agent, text in candidates:
        text = " ".join(text.split())
        if text:
            by_agent[agent][text] = None
    chosen: dict[str, list[str]] = {}
    for agent, texts in by_agent.items():
        pool = sorted(texts, key=lambda t: (stable_hash(t), t))
        if len(pool) <= per_agent:
            chosen[agent] = pool
            continue
        terms_of = {text: set(content_terms(text)) for text in pool}
        # Rarer words are worth more: they are what tells this agent apart.
        frequency: Counter[str] = Counter(term for terms in terms_of.values() for term in terms)
        covered: Counter[str] = Counter()
        picked: list[str] = []
        remaining = list(pool)
        while remaining and len(picked) < per_agent:
            best = max(remaining, key=lambda text: _gain(terms_of[text], covered, frequency))  # ties keep hash order
            picked.append(best)
            remaining.remove(best)
            covered.update(terms_of[best])
        chosen[agent] = picked
    return chosen


def _gain(terms: set[str], covered: Counter[str], frequency: Counter[str]) -> float:
    """What an example adds: each word once, less for words already covered (hapaxes add nothing)."""
    # fsum: exact whatever the set's (hash-seeded) order, so ties break the same in every run.
    return math.fsum(1.0 / (1 + covered[term]) for term in terms if frequency[term] > 1)


def example_candidates(dialogues: Iterable[Dialogue]) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """``(agent, text)`` of labelled user turns: (where an agent first appears in its
    dialogue, every later turn of that agent)."""
    first: list[tuple[str, str]] = []
    later: list[tuple[str, str]] = []
    for dialogue in dialogues:
        seen: set[str] = set()
        for turn in dialogue.turns:
            if turn.role != "user" or not turn.agents:
                continue
            agent = turn.agents[0]
            (later if agent in seen else first).append((agent, turn.text))
            seen.add(agent)
    return first, later


def dialogue_examples(dialogues: Iterable[Dialogue], *, per_agent: int = MAX_EXAMPLES) -> dict[str, list[str]]:
    """Up to ``per_agent`` examples per agent: half where people open an errand ("I need a
    taxi"), half from the turns that follow ("book a table for 3 at 13:00 on Monday").

    Openings alone teach the router nothing about follow-ups, which then drift to whichever
    agent's openings mention days and times; follow-ups alone miss the domain words. When
    one half runs short the other fills the quota.
    """
    first, later = example_candidates(dialogues)
    half = per_agent - per_agent // 2
    openings = sample_examples(first, per_agent=per_agent)
    follow_ups = sample_examples(later, per_agent=per_agent)
    chosen: dict[str, list[str]] = {}
    for agent in sorted(set(openings) | set(follow_ups)):
        opens, follows = openings.get(agent, []), follow_ups.get(agent, [])
        take_open = max(half, per_agent - len(follows))
        picked = list(dict.fromkeys(opens[:take_open] + follows))[:per_agent]
        chosen[agent] = picked
    return chosen


def slot_descriptions(dialogues: Iterable[Dialogue], *, limit: int = 12) -> dict[str, str]:
    """A description per agent from the slot names its turns annotate (datasets without a schema)."""
    names: dict[str, Counter[str]] = defaultdict(Counter)
    for dialogue in dialogues:
        for turn in dialogue.turns:
            for slot in turn.slots:
                names[slot.domain][slot.name.lower().replace("_", " ")] += 1
    return {
        agent: f"{agent.replace('_', ' ')}: " + ", ".join(name for name, _ in counter.most_common(limit))
        for agent, counter in names.items()
        if agent != GENERAL
    }


def build_profiles(
    agents: Iterable[str],
    descriptions: dict[str, str],
    examples: dict[str, list[str]],
    *,
    keywords: dict[str, tuple[str, ...]] | None = None,
) -> list[AgentProfile]:
    """One profile per agent, in sorted order (deterministic scoring ties)."""
    keywords = keywords or {}
    return [
        AgentProfile(
            name=agent,
            description=descriptions.get(agent, agent.replace("_", " ")),
            examples=tuple(examples.get(agent, ())),
            keywords=keywords.get(agent, ()),
        )
        for agent in sorted(set(agents))
    ]


def general_profile(extra_examples: Sequence[str] = ()) -> AgentProfile:
    """The hub's real ``general`` agent as the router knows it."""
    from scopehub.agents.general import agent as general

    examples = tuple(dict.fromkeys((*general.examples, *extra_examples)))[:MAX_EXAMPLES]
    return AgentProfile(name=general.name, description=general.description, examples=examples, keywords=general.keywords)


def clinc_profiles(
    path: str | Path,
    train_split: str,
    *,
    per_agent: int = MAX_EXAMPLES,
    leave_out: tuple[int, int] | None = None,
    holdout: Holdout | None = None,
) -> list[AgentProfile]:
    """CLINC150 agents: one per domain (described by its intents) plus ``general``.

    ``leave_out=(fold, folds)`` leaves out the training items whose text hashes to ``fold``
    modulo ``folds`` (cross-validation on the training split). ``holdout``
    (:class:`eval.holdout.Holdout`): its frozen messages are never examples.
    """
    from ..loaders import DatasetFormatError, clinc_domains, load_clinc

    domains_file = file_beside(path, "domains.json")
    domains = clinc_domains(domains_file)
    train = load_clinc(path, train_split, domains_path=domains_file)
    if holdout is not None:
        train, _ = holdout.split_texts(train)
    if leave_out is not None:
        train = [item for item in train if stable_hash(item[0]) % leave_out[1] != leave_out[0]]
    examples = sample_examples(((domain, text) for text, domain in train if domain), per_agent=per_agent)
    descriptions = {
        domain: f"{domain.replace('_', ' ')}: " + ", ".join(intent.replace("_", " ") for intent in intents)
        for domain, intents in domains.items()
    }
    oos: list[str] = []
    # Without an out-of-scope training split, general keeps its own examples only.
    with contextlib.suppress(DatasetFormatError):
        oos = [text for text, domain in load_clinc(path, f"oos_{train_split}", domains_path=domains_file) if domain is None]
    oos_examples = sample_examples((GENERAL, text) for text in oos).get(GENERAL, [])
    profiles = build_profiles(domains, descriptions, examples)
    return [*profiles, general_profile(oos_examples)]


def file_beside(path: str | Path, name: str) -> Path:
    target = Path(path)
    folder = target if target.is_dir() else target.parent
    for candidate in (folder / name, folder / f"{name}.gz"):
        if candidate.exists():
            return candidate
    return folder / name


def hub_profiles() -> list[AgentProfile]:
    """The hub's real agents (``discover_agents``) as the router knows them."""
    from scopehub.agents import discover_agents
    from scopehub.hub.orchestrator._route import agent_profile

    return [agent_profile(spec) for spec in discover_agents()]
