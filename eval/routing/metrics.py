"""What a routing run scores: accuracy, macro F1 and confusions; folds of dialogues and
of agents, and the spread of a figure over them."""

from __future__ import annotations

import statistics
from collections import Counter, defaultdict
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from scopehub.hub.routing import (
    AgentProfile,
)

from ..loaders import Dialogue
from .profiles import stable_hash


def split_train(dialogues: Sequence[Dialogue], *, folds: int = 5, fold: int = 0) -> tuple[list[Dialogue], list[Dialogue]]:
    """(train, test): dialogues whose id's CRC-32 is ``fold`` modulo ``folds`` give the examples."""
    train = [d for d in dialogues if stable_hash(d.id) % folds == fold]
    test = [d for d in dialogues if stable_hash(d.id) % folds != fold]
    return train, test


def agent_folds(agents: Iterable[str], size: int) -> list[list[str]]:
    """Agents in groups of ``size`` (stable-hash order), each group hidden in turn by ``--unseen``."""
    ordered = sorted(set(agents), key=lambda agent: (stable_hash(agent), agent))
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


def percentile(values: Sequence[float], q: float) -> float:
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
            "p50_ms": round(percentile(result.latencies_ms, 50), 3),
            "p95_ms": round(percentile(result.latencies_ms, 95), 3),
            "cpu_p50_ms": round(percentile(result.cpu_ms, 50), 3),
            "cpu_p95_ms": round(percentile(result.cpu_ms, 95), 3),
            "llm_tokens": 0,
            "routed": len(result.latencies_ms),
            "unlabelled": result.unlabelled,
            "by_via": dict(result.by_via),
        }
    )
    report.update(result.extra)
    return report


def _pooled(unseen: Sequence[dict[str, Any]]) -> float | None:
    scored = [(fold["n"], fold["accuracy"]) for fold in unseen if fold["accuracy"] is not None and fold["n"]]
    total = sum(n for n, _ in scored)
    return round(sum(n * accuracy for n, accuracy in scored) / total, 4) if total else None


def fold_report(accuracies: Sequence[float], unseen: Sequence[dict[str, Any]], latencies: Sequence[float]) -> dict[str, Any]:
    """Cross-validated figures: mean, sd, min and max over folds (never the best fold alone)."""
    report: dict[str, Any] = {}
    if accuracies:
        report["cv_accuracy"] = spread(accuracies)
    if unseen:
        report["unseen"] = {
            "accuracy": spread([fold["accuracy"] for fold in unseen if fold["accuracy"] is not None]),
            "precision": spread([fold["precision"] for fold in unseen if fold["precision"] is not None]),
            "overall_accuracy": spread([fold["overall_accuracy"] for fold in unseen if fold["overall_accuracy"] is not None]),
            # Every hidden agent's turns together (each agent is hidden once in the rotation).
            "pooled_accuracy": _pooled(unseen),
            "per_fold": list(unseen),
        }
    if latencies:
        report["cv_p95_ms"] = round(percentile(latencies, 95), 3)
    return report
