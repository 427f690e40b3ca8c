"""A dataset made ready to replay: its dialogues, the agents' prompts, a router per chat."""

from __future__ import annotations

import contextlib
from collections.abc import Iterable
from dataclasses import dataclass

from scopehub.hub.context import (
    AgentPrompt,
)
from scopehub.hub.routing import DEFAULT_AGENT, LocalClassifier

from ..loaders import Dialogue
from .agents import agent_prompts
from .chat import ClassifierFor

GENERAL = DEFAULT_AGENT


@dataclass
class Prepared:
    """A dataset ready to replay: dialogues, agents' prompts and the router per chat."""

    dialogues: list[Dialogue]
    prompts: dict[str, AgentPrompt]
    classifier_for: ClassifierFor
    default_also_sees: dict[str, tuple[str, ...]]
    agents: list[str]


def load_dialogues(fmt: str, path: str) -> tuple[list[Dialogue], dict[str, str]]:
    """Dialogues of PATH and the agent descriptions its dataset provides."""
    from ..loaders import load_jsonl, load_multiwoz, load_sgd, load_sgd_schema
    from ..routing import slot_descriptions

    if fmt == "multiwoz":
        dialogues = load_multiwoz(path)
        return dialogues, slot_descriptions(dialogues)
    if fmt == "sgd":
        dialogues = load_sgd(path)
        descriptions = slot_descriptions(dialogues)
        # A lone dialogue file without its schema: slot names describe the domains.
        with contextlib.suppress(FileNotFoundError, ValueError):
            descriptions.update(load_sgd_schema(path))
        return dialogues, descriptions
    if fmt == "jsonl":
        return load_jsonl(path), {}
    raise ValueError(f"unknown format {fmt!r}")


def prepare(
    fmt: str,
    path: str,
    *,
    chain: int,
    limit: int | None = None,
    train_path: str | None = None,
    per_agent: int = 50,
) -> Prepared:
    """Load PATH and build the agents and routers for a replay.

    The predicted router's examples come from ``train_path`` when given; otherwise the
    chats are split in two folds by position and each fold is routed by a router whose
    examples come from the other fold (cross-fitting: no turn is routed by a router that
    was shown it, and every dialogue is still replayed).
    """
    from ..routing import build_profiles, dialogue_examples, general_profile

    dialogues, descriptions = load_dialogues(fmt, path)
    if limit:
        dialogues = dialogues[:limit]
    agents = {a for d in dialogues for t in d.turns for a in (*t.agents, *t.also_sees)} | {GENERAL}
    prompts, specs = agent_prompts(agents, descriptions)
    descriptions = {name: spec.description for name, spec in specs.items()}
    keywords = {name: spec.keywords for name, spec in specs.items()}
    default_also_sees = {name: spec.also_sees for name, spec in specs.items() if spec.also_sees}
    size = max(chain, 1)
    chains = [dialogues[i : i + size] for i in range(0, len(dialogues), size)]

    def classifier(train: Iterable[Dialogue]) -> LocalClassifier:
        examples = dialogue_examples(train, per_agent=per_agent)
        domain_agents = sorted(a for a in agents if a != GENERAL)
        general_examples = list(specs[GENERAL].examples) if GENERAL in specs else []
        profiles = build_profiles(domain_agents, descriptions, examples, keywords=keywords)
        return LocalClassifier([*profiles, general_profile(general_examples)])

    if train_path:
        trained, _ = load_dialogues(fmt, train_path)
        shared = classifier(trained)
        return Prepared(dialogues, prompts, lambda _: shared, default_also_sees, sorted(agents))
    folds = [
        classifier(d for number, group in enumerate(chains) if number % 2 != fold for d in group) for fold in (0, 1)
    ]
    return Prepared(dialogues, prompts, lambda number: folds[(number % 2)], default_also_sees, sorted(agents))
