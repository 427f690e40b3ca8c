"""Your own labelled messages (``{"text", "agent"}`` lines) against the hub's agents."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from scopehub.hub.routing import (
    AgentProfile,
)

from ..loaders import Turn
from .metrics import (
    agent_folds,
    fold_report,
    hide_examples,
    percentile,
    routing_metrics,
    unseen_metrics,
)
from .profiles import hub_profiles
from .router import RouterOptions, embedding_figures
from .runs import route_all


def load_labelled(path: str | Path) -> list[dict[str, str]]:
    """``{"text", "agent"}`` lines (optionally ``lang``): a maintainer's own labelled messages."""
    import json

    from ..loaders import DatasetFormatError

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
    options: RouterOptions | None = None,
    unseen: int = 0,
    show_progress: bool = False,
    profiles: Sequence[AgentProfile] | None = None,
) -> dict[str, Any]:
    """Your labelled messages against the hub's agents: does each agent get its traffic?"""
    from ..loaders import DatasetFormatError

    profiles = list(profiles) if profiles is not None else hub_profiles()
    names = {profile.name for profile in profiles}
    rows = load_labelled(path)
    unknown = sorted({row["agent"] for row in rows} - names)
    if unknown:
        raise DatasetFormatError(f"{path}: unknown agents {', '.join(unknown)} (the hub has {', '.join(sorted(names))})")
    if after and after not in names:
        raise DatasetFormatError(f"--after {after}: no such agent (the hub has {', '.join(sorted(names))})")
    conversations = labelled_conversations(rows, profiles, after)
    result, info = route_all(profiles, conversations, options, show_progress=show_progress)
    # The opening exchange is routed but not a message of the file: score the file's only.
    scored = [(gold, guess) for gold, guess in zip(result.gold, result.predicted, strict=True)]
    if after:
        scored = scored[1::2]
    gold = [labels for labels, _ in scored]
    predicted = [guess for _, guess in scored]
    report = routing_metrics(gold, predicted)
    report.update(
        {
            "p50_ms": round(percentile(result.latencies_ms, 50), 3),
            "p95_ms": round(percentile(result.latencies_ms, 95), 3),
            "cpu_p50_ms": round(percentile(result.cpu_ms, 50), 3),
            "cpu_p95_ms": round(percentile(result.cpu_ms, 95), 3),
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
    report.update(embedding_figures(info))
    unseen_folds = []
    for hidden in agent_folds(names, unseen) if unseen > 0 else []:
        fold_result, fold_info = route_all(hide_examples(profiles, hidden), conversations, options)
        fold_info.pop("_timed", None)
        pairs = list(zip(fold_result.gold, fold_result.predicted, strict=True))[1::2 if after else 1]
        unseen_folds.append(unseen_metrics([g for g, _ in pairs], [p for _, p in pairs], hidden))
    report.update(fold_report([], unseen_folds, []))
    return report
