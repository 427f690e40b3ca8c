"""``agents-hub eval phrasings``: does the embedded model's choice of what to do generalise
to wording it was never shown?

The phrasings are the tunable part of the corpus: every tool's example utterances (the
planner's classes, in several languages) and the planner's "answer in words" class (small
talk, what people tell about themselves). The frozen part is ``eval local --sessions
frozen``. Here each intent's phrasings are dealt into K folds; for each fold, the router
(the product's own: lexical, blended with embeddings when the ``semantic`` extra is there)
and the planner learn from the other folds only, and each held-out phrasing is routed and
its tool chosen, as the hub does for a first message (zero tokens, no model). A phrasing
is right when it reaches its tool in the tool's own agent (``search_memory`` and words:
any agent). Reported: accuracy per fold, mean and standard deviation, and per intent.
"""

from __future__ import annotations

import json
import statistics
import sys
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import click

__all__ = ["Phrasing", "cross_validate", "phrasings", "phrasings_command"]


@dataclass(frozen=True, slots=True)
class Phrasing:
    """One utterance and what it asks for: a tool of an agent (None: any agent), or words."""

    text: str
    agent: str | None
    intent: str


def phrasings(registry: Any) -> list[Phrasing]:
    """The tunable corpus: the tools' examples and the planner's words class."""
    from scopehub.agents import search_memory
    from scopehub.hub.models.planner import ANSWER, IN_WORDS

    found = [Phrasing(example.text, spec.name, tool.name) for spec in registry for tool in spec.tools for example in tool.examples]
    found += [Phrasing(example.text, None, search_memory.name) for example in search_memory.examples]
    found += [Phrasing(text, None, ANSWER) for text in IN_WORDS]
    return found


def _folds(corpus: Sequence[Phrasing], k: int) -> list[int]:
    """Each phrasing's fold, dealt in turn within its intent (every fold holds every intent)."""
    seen: dict[str, int] = defaultdict(int)
    folds = []
    for phrasing in corpus:
        folds.append(seen[phrasing.intent] % k)
        seen[phrasing.intent] += 1
    return folds


def cross_validate(registry: Any, settings: Any, k: int = 5) -> dict[str, Any]:
    """Leave-phrasings-out accuracy of routing and tool choice (see the module docstring)."""
    from scopehub.agents import search_memory
    from scopehub.hub.context.prompt import agent_prompt
    from scopehub.hub.models.planner import ANSWER, Demo, Planner, planner_embedder
    from scopehub.hub.orchestrator._route import agent_profile, build_classifier

    embedder, cache = planner_embedder(settings.router_embedder)
    corpus = phrasings(registry)
    folds = _folds(corpus, k)
    per_fold: list[float] = []
    per_intent: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    misses: list[dict[str, Any]] = []
    tools = {spec.name: list(agent_prompt(spec).offered(True)) for spec in registry}
    for fold in range(k):
        held = {corpus[i].text for i in range(len(corpus)) if folds[i] == fold}
        catalogue: dict[str, list[Demo]] = defaultdict(list)
        for spec in registry:
            for tool in (*spec.tools, search_memory):
                catalogue[tool.name] += [Demo(e.text, e.args, e.earlier) for e in tool.examples if e.text not in held]
        catalogue[ANSWER] = [Demo(p.text) for p in corpus if p.intent == ANSWER and p.text not in held]
        planner = Planner(embedder=embedder, embedding_cache=cache)
        planner.learn(catalogue, keywords={t.name: t.keywords for spec in registry for t in (*spec.tools, search_memory) if t.keywords})
        profiles = [agent_profile(spec, leave_out=held) for spec in registry]
        classifier, _ = build_classifier(profiles, settings)
        right = total = 0
        for index, phrasing in enumerate(corpus):
            if folds[index] != fold:
                continue
            scores = classifier.scores(phrasing.text)
            agent = max(scores, key=lambda name: scores[name]) if scores else "general"
            choice = planner.choose(phrasing.text, tools[agent])
            ok = choice == phrasing.intent and (phrasing.agent is None or phrasing.agent == agent or phrasing.intent == ANSWER)
            right += ok
            total += 1
            per_intent[phrasing.intent][0] += ok
            per_intent[phrasing.intent][1] += 1
            if not ok:
                misses.append({"fold": fold, "text": phrasing.text, "intent": phrasing.intent, "agent": phrasing.agent, "routed": agent, "chose": choice})
        per_fold.append(right / total if total else 0.0)
    return {
        "folds": k,
        "phrasings": len(corpus),
        "accuracy_per_fold": [round(value, 3) for value in per_fold],
        "mean": round(statistics.mean(per_fold), 3),
        "sd": round(statistics.stdev(per_fold), 3) if k > 1 else 0.0,
        "per_intent": {name: {"right": r, "phrasings": n} for name, (r, n) in sorted(per_intent.items())},
        "misses": misses,
    }


@click.command("phrasings")
@click.option("--folds", "k", type=click.IntRange(2, 20), default=5, show_default=True, help="folds of leave-phrasings-out")
@click.option("--json", "as_json", is_flag=True, help="the report as JSON on standard output")
@click.option("--misses", is_flag=True, help="list every held-out phrasing that went wrong")
def phrasings_command(k: int, as_json: bool, misses: bool) -> None:
    """Cross-validated intent accuracy of the embedded model's router and tool choice (zero tokens, no model)."""
    import logging

    from scopehub.agents import discover_agents
    from scopehub.hub.settings import load_settings

    logging.getLogger().setLevel(logging.ERROR)
    report = cross_validate(discover_agents(), load_settings(), k)
    if as_json:
        sys.stdout.write(json.dumps(report, ensure_ascii=False, indent=2) + "\n")
        return
    click.echo(f"{report['phrasings']} phrasings, {k} folds (leave phrasings out): intent accuracy {report['mean']:.3f} ± {report['sd']:.3f}")
    click.echo("per fold: " + ", ".join(f"{value:.3f}" for value in report["accuracy_per_fold"]))
    click.echo("per intent: " + ", ".join(f"{name} {row['right']}/{row['phrasings']}" for name, row in report["per_intent"].items()))
    if misses:
        for miss in report["misses"]:
            click.echo(f"  [{miss['fold']}] {miss['text']!r}: wanted {miss['intent']} ({miss['agent'] or 'any agent'}), got {miss['chose']} in {miss['routed']}")
