"""What a replay counts: totals per mode, per call and per fold, and the JSON report."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from ..awareness_replay import (
    AWARENESS_MODES,
    DEFAULT_BUDGET,
)
from ..cache import CacheModel, CacheTotals
from ..judge import JudgeItem

MODES = ("full", "scoped_no_also", "scoped", "filter_first", "oracle", *AWARENESS_MODES)


@dataclass
class ModeTotals:
    """Sums over the calls of one mode."""

    history_tokens: int = 0
    request_tokens: int = 0
    history_messages: int = 0
    other_agent_messages: int = 0
    recalled: int = 0
    awareness_tokens: int = 0


@dataclass
class ReplayResult:
    """Everything a replay counted."""

    calls: int = 0
    references: int = 0
    beyond_window: int = 0
    references_own_agent: int = 0  # pairs the agent's own messages hold (not references)
    references_other_dialogue: int = 0  # pairs only another dialogue of the chain holds (not references)
    modes: dict[str, ModeTotals] = field(default_factory=lambda: {mode: ModeTotals() for mode in MODES})
    by_via: Counter[str] = field(default_factory=Counter)
    labelled: int = 0  # user turns with a gold agent (predicted routes are scored on them)
    agreed: int = 0
    also_sees_calls: int = 0
    fixed_tokens: int = 0  # persona + rules + tools, summed over calls
    search_offered: int = 0  # calls offered search_memory (hub.context.offer)
    search_offered_window: int = 0  # ... of which the window was full
    search_offered_cue: int = 0  # ... of which the message refers to the past
    search_needed: int = 0  # calls whose scoped context misses a referenced message
    search_needed_offered: int = 0
    message_tokens: int = 0
    seconds: float = 0.0
    judge_items: list[JudgeItem] = field(default_factory=list)
    cache_model: CacheModel | None = None
    # Billed-equivalent figures per mode under the cache model (per-agent cache), and for
    # full history also under a per-scope cache (its best case): "full/scope".
    cache: dict[str, CacheTotals] = field(default_factory=dict)
    awareness_view: str = "interests"
    awareness_budget: int = DEFAULT_BUDGET
    awareness_events: int = 0  # dialogue.act events emitted
    awareness_blocks: int = 0  # calls shown a non-empty block
    awareness_events_shown: int = 0

    def summary(self) -> dict[str, Any]:
        """The JSON report: per-mode figures, savings against ``full``, router figures."""
        calls = max(self.calls, 1)
        full = self.modes["full"]
        modes: dict[str, Any] = {}
        for name, totals in self.modes.items():
            modes[name] = {
                "history_tokens_per_call": round(totals.history_tokens / calls, 1),
                "request_tokens_per_call": round(totals.request_tokens / calls, 1),
                "history_messages_per_call": round(totals.history_messages / calls, 2),
                "other_agent_messages_per_call": round(totals.other_agent_messages / calls, 2),
                "reference_recall": round(totals.recalled / self.references, 4) if self.references else None,
                "history_saving": round(1 - totals.history_tokens / full.history_tokens, 4) if full.history_tokens else 0.0,
                "awareness_tokens_per_call": round(totals.awareness_tokens / calls, 1),
                # History and awareness together against the full window's history.
                "history_awareness_saving": (
                    round(1 - (totals.history_tokens + totals.awareness_tokens) / full.history_tokens, 4) if full.history_tokens else 0.0
                ),
                "request_saving": round(1 - totals.request_tokens / full.request_tokens, 4) if full.request_tokens else 0.0,
            }
        report: dict[str, Any] = {
            "calls": self.calls,
            "references": self.references,
            "references_beyond_window": self.beyond_window,
            "not_references": {"own_agent": self.references_own_agent, "other_dialogue": self.references_other_dialogue},
            "fixed_tokens_per_call": round(self.fixed_tokens / calls, 1),
            "search_memory_offered_share": round(self.search_offered / calls, 4),
            "search_memory": {
                "offered": self.search_offered,
                "offered_window_full": self.search_offered_window,
                "offered_refers_to_past": self.search_offered_cue,
                "needed": self.search_needed,
                "needed_and_offered": self.search_needed_offered,
                "offered_when_needed": round(self.search_needed_offered / self.search_needed, 4) if self.search_needed else None,
            },
            "message_tokens_per_call": round(self.message_tokens / calls, 1),
            "router_tokens_per_message": 0,
            "modes": modes,
            "router": {
                "kind": "local",
                "router_tokens_per_message": 0,
                "by_via": dict(self.by_via),
                "agreement_with_gold": round(self.agreed / self.labelled, 4) if self.labelled else None,
                "also_sees_share": round(self.also_sees_calls / calls, 4),
            },
            "awareness": {
                "view": self.awareness_view,
                "budget": self.awareness_budget,
                "events": self.awareness_events,
                "block_share": round(self.awareness_blocks / calls, 4),
                "events_shown_per_call": round(self.awareness_events_shown / calls, 2),
            },
            "seconds": round(self.seconds, 2),
        }
        if self.cache_model is not None:
            report["cache"] = self._cache_summary()
        return report

    def _cache_summary(self) -> dict[str, Any]:
        """Per mode under the cache model: request, stable-prefix, cached, billed tokens; savings."""
        assert self.cache_model is not None
        figures = {label: totals.per_call() for label, totals in self.cache.items()}
        full, best = self.cache["full"], self.cache["full/scope"]
        for label, totals in self.cache.items():
            figures[label]["billed_saving_vs_full"] = round(1 - totals.billed_tokens / full.billed_tokens, 4) if full.billed_tokens else 0.0
            figures[label]["billed_saving_vs_full_per_scope"] = (
                round(1 - totals.billed_tokens / best.billed_tokens, 4) if best.billed_tokens else 0.0
            )
        return {"model": asdict(self.cache_model), "description": self.cache_model.describe(), "modes": figures}


def merge_results(results: Sequence[ReplayResult]) -> ReplayResult:
    """One result summing several (the pooled figures of :func:`replay_folds`)."""
    first = results[0] if results else ReplayResult()
    merged = ReplayResult(
        cache_model=first.cache_model, awareness_view=first.awareness_view, awareness_budget=first.awareness_budget
    )
    for result in results:
        # Every count (search offers, awareness events and blocks too), never the settings.
        for item in fields(ReplayResult):
            value = getattr(result, item.name)
            if isinstance(value, (int, float)) and not isinstance(value, bool) and item.name != "awareness_budget":
                setattr(merged, item.name, getattr(merged, item.name) + value)
        merged.by_via.update(result.by_via)
        merged.judge_items.extend(result.judge_items)
        for mode, totals in result.modes.items():
            target = merged.modes[mode]
            for item in fields(ModeTotals):
                setattr(target, item.name, getattr(target, item.name) + getattr(totals, item.name))
        for label, totals in result.cache.items():
            into = merged.cache.setdefault(label, CacheTotals())
            for item in fields(CacheTotals):
                setattr(into, item.name, getattr(into, item.name) + getattr(totals, item.name))
    return merged


def fold_figures(results: Sequence[ReplayResult]) -> dict[str, Any]:
    """Mean ± sd and min–max over folds of the scoped mode's reference recall and savings."""
    from ..routing import spread

    summaries = [result.summary() for result in results]
    scoped = [summary["modes"]["scoped"] for summary in summaries]
    aware = [summary["modes"]["scoped_awareness"] for summary in summaries]
    return {
        "scoped_reference_recall": spread([m["reference_recall"] for m in scoped if m["reference_recall"] is not None]),
        "scoped_history_saving": spread([m["history_saving"] for m in scoped]),
        "scoped_awareness_reference_recall": spread([m["reference_recall"] for m in aware if m["reference_recall"] is not None]),
        "history_awareness_saving": spread([m["history_awareness_saving"] for m in aware]),
        "awareness_tokens_per_call": spread([m["awareness_tokens_per_call"] for m in aware]),
        "scoped_no_also_reference_recall": spread(
            [s["modes"]["scoped_no_also"]["reference_recall"] for s in summaries if s["modes"]["scoped_no_also"]["reference_recall"] is not None]
        ),
        "router_agreement": spread([s["router"]["agreement_with_gold"] for s in summaries if s["router"]["agreement_with_gold"] is not None]),
    }
