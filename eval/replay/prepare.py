"""A dataset made ready to replay: its dialogues, the agents' prompts, a router per chat."""

from __future__ import annotations

import contextlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from scopehub.hub.context import (
    AgentPrompt,
)
from scopehub.hub.routing import DEFAULT_AGENT, LocalClassifier

from ..holdout import load_holdout
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
    router: dict[str, Any] = field(default_factory=dict)  # the configuration the predicted routes ran
    holdout: dict[str, Any] = field(default_factory=dict)  # what of PATH was frozen, what was replayed


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
    options: Any = None,
    frozen: bool = False,
) -> Prepared:
    """Load PATH and build the agents and routers for a replay.

    The predicted router's examples come from ``train_path`` when given; otherwise the
    chats are split in two folds by position and each fold is routed by a router whose
    examples come from the other fold (cross-fitting: no turn is routed by a router that
    was shown it, and every dialogue is still replayed).

    The routers are the product's (``options``: an :class:`eval.routing.RouterOptions`,
    default the hub's settings). The frozen dialogues (eval/data/frozen.json) are left
    out; ``frozen`` replays them alone, routed by a router trained on all the others.
    """
    from ..routing import (
        RouterOptions,
        build_classifier,
        build_profiles,
        dialogue_examples,
        general_profile,
    )

    dialogues, descriptions = load_dialogues(fmt, path)
    holdout = load_holdout(fmt) if fmt in ("multiwoz", "sgd") else None
    rest, frozen_part = holdout.split(dialogues) if holdout is not None else (dialogues, [])
    if frozen and not frozen_part:
        raise ValueError(f"--frozen: {path} holds none of the frozen dialogues (eval/data/frozen.json)")
    dialogues = frozen_part if frozen else rest
    if limit:
        dialogues = dialogues[:limit]
    agents = {a for d in dialogues for t in d.turns for a in (*t.agents, *t.also_sees)} | {GENERAL}
    prompts, specs = agent_prompts(agents, descriptions)
    descriptions = {name: spec.description for name, spec in specs.items()}
    keywords = {name: spec.keywords for name, spec in specs.items()}
    default_also_sees = {name: spec.also_sees for name, spec in specs.items() if spec.also_sees}
    size = max(chain, 1)
    chains = [dialogues[i : i + size] for i in range(0, len(dialogues), size)]

    router: dict[str, Any] = {}

    def classifier(train: Iterable[Dialogue]) -> LocalClassifier:
        examples = dialogue_examples(train, per_agent=per_agent)
        domain_agents = sorted(a for a in agents if a != GENERAL)
        general_examples = list(specs[GENERAL].examples) if GENERAL in specs else []
        profiles = build_profiles(domain_agents, descriptions, examples, keywords=keywords)
        built, info = build_classifier([*profiles, general_profile(general_examples)], options or RouterOptions())
        info.pop("_timed", None)
        router.update(info["router"], configuration=info["configuration"])
        return built

    held = {
        "file": "eval/data/frozen.json",
        "frozen_dialogues_in_path": len(frozen_part),
        "replayed": "frozen" if frozen else "the rest",
    }
    if train_path or frozen:
        trained = rest
        if train_path:
            trained = load_dialogues(fmt, train_path)[0]
            trained = holdout.split(trained)[0] if holdout is not None else trained
        shared = classifier(trained)
        return Prepared(dialogues, prompts, lambda _: shared, default_also_sees, sorted(agents), router, held)
    folds = [
        classifier(d for number, group in enumerate(chains) if number % 2 != fold for d in group) for fold in (0, 1)
    ]
    return Prepared(dialogues, prompts, lambda number: folds[(number % 2)], default_also_sees, sorted(agents), router, held)
