"""The awareness modes over folds of chats: mean and spread, and a view chosen without the test fold.

``agents-hub eval awareness --format multiwoz|sgd PATH [--chain 3] [--routes predicted] [--folds 5]
[--views interests,collaborators,both] [--budgets 150]``

The chats (``--chain`` dialogues each) are dealt into ``--folds`` folds by position
(chat i to fold i mod K). Every configuration (awareness view x budget) is replayed on
every fold with :func:`eval.replay.replay`; the predicted router stays cross-fitted as in
``eval tokens`` (each chat is routed by the router of its position in the whole run).

Printed per configuration: ``scoped_awareness`` reference recall, history+awareness
saving against the full window and awareness tokens per call, pooled over all folds and
as mean, min and max over folds (plus ``awareness_no_also`` recall). Then the honest
figure for choosing a configuration: for each fold, the configuration that is best on
the *other* folds (meets the targets there: saving >= ``--min-saving``, awareness <=
``--max-awareness``; then the highest recall, then the fewest awareness tokens; when none
meets them, the highest saving) is scored on the held-out fold.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass, fields
from typing import Any

import click

from . import _report
from .awareness_replay import DEFAULT_BUDGET, VIEWS
from .replay import ModeTotals, Prepared, ReplayResult, prepare, replay

__all__ = ["FoldFigures", "awareness_command", "choose", "cross_validate", "fold_figures", "pool"]


@dataclass(frozen=True, slots=True)
class FoldFigures:
    """The figures a configuration is judged by, on some chats."""

    recall: float | None  # scoped_awareness reference recall
    saving: float  # scoped_awareness history+awareness saving against full history
    awareness: float  # awareness tokens per call
    recall_no_also: float | None  # awareness_no_also reference recall
    scoped_recall: float | None  # scoped (no block), for comparison
    references: int
    calls: int


def pool(results: Sequence[ReplayResult]) -> ReplayResult:
    """One result with the sums of several (figures of disjoint chats)."""
    total = ReplayResult(awareness_view=results[0].awareness_view, awareness_budget=results[0].awareness_budget)
    for result in results:
        for item in fields(ReplayResult):
            value = getattr(result, item.name)
            if isinstance(value, int) and item.name != "awareness_budget":
                setattr(total, item.name, getattr(total, item.name) + value)
        for mode, totals in result.modes.items():
            into = total.modes.setdefault(mode, ModeTotals())
            for item in fields(ModeTotals):
                setattr(into, item.name, getattr(into, item.name) + getattr(totals, item.name))
    return total


def fold_figures(result: ReplayResult) -> FoldFigures:
    """The judged figures of one (pooled) result."""
    modes = result.summary()["modes"]
    aware = modes["scoped_awareness"]
    return FoldFigures(
        recall=aware["reference_recall"],
        saving=aware["history_awareness_saving"],
        awareness=aware["awareness_tokens_per_call"],
        recall_no_also=modes["awareness_no_also"]["reference_recall"],
        scoped_recall=modes["scoped"]["reference_recall"],
        references=result.references,
        calls=result.calls,
    )


def choose(candidates: dict[str, FoldFigures], *, min_saving: float, max_awareness: float) -> str:
    """The configuration that meets the targets with the best recall (then the fewest tokens)."""
    meeting = [name for name, f in candidates.items() if f.saving >= min_saving and f.awareness <= max_awareness]
    if meeting:
        return max(meeting, key=lambda name: (candidates[name].recall or 0.0, -candidates[name].awareness))
    return max(candidates, key=lambda name: candidates[name].saving)


def cross_validate(
    prepared: Prepared,
    *,
    folds: int,
    configs: Sequence[tuple[str, int]],
    tokenizer: Any,
    routes: str,
    chain: int,
    window: int = 40,
    tail: int = 4,
    show_progress: bool = False,
) -> dict[str, list[ReplayResult]]:
    """Per configuration name (``view@budget``), its result on each fold."""
    size = max(chain, 1)
    chats = [prepared.dialogues[i : i + size] for i in range(0, len(prepared.dialogues), size)]
    members = [[number for number in range(len(chats)) if number % folds == fold] for fold in range(folds)]
    out: dict[str, list[ReplayResult]] = {}
    bar = _report.Progress(len(configs) * folds, "folds", enabled=show_progress)
    for view, budget in configs:
        runs = []
        for ids in members:
            # The partial last chat, if any, is last in its fold: chaining stays the same.
            dialogues = [d for number in ids for d in chats[number]]
            runs.append(
                replay(
                    dialogues,
                    prompts=prepared.prompts,
                    classifier_for=lambda n, ids=ids: prepared.classifier_for(ids[n]),
                    tokenizer=tokenizer,
                    routes=routes,
                    chain=chain,
                    window=window,
                    tail=tail,
                    default_also_sees=prepared.default_also_sees,
                    awareness_view=view,
                    awareness_budget=budget,
                )
            )
            bar.advance()
        out[f"{view}@{budget}"] = runs
    bar.close()
    return out


def _spread(values: Sequence[float | None]) -> dict[str, float | None]:
    known = [v for v in values if v is not None]
    if not known:
        return {"mean": None, "min": None, "max": None, "sd": None}
    return {
        "mean": round(statistics.fmean(known), 4),
        "min": round(min(known), 4),
        "max": round(max(known), 4),
        "sd": round(statistics.stdev(known), 4) if len(known) > 1 else 0.0,
    }


def report_folds(
    runs: dict[str, list[ReplayResult]], *, min_saving: float, max_awareness: float
) -> dict[str, Any]:
    """Pooled and per-fold figures per configuration, and the held-out scores of the chosen one."""
    folds = len(next(iter(runs.values())))
    per_fold = {name: [fold_figures(r) for r in results] for name, results in runs.items()}
    configs: dict[str, Any] = {}
    for name, results in runs.items():
        figures = per_fold[name]
        configs[name] = {
            "pooled": _as_dict(fold_figures(pool(results))),
            "folds": [_as_dict(f) for f in figures],
            "recall": _spread([f.recall for f in figures]),
            "saving": _spread([f.saving for f in figures]),
            "awareness_tokens_per_call": _spread([f.awareness for f in figures]),
            "recall_no_also": _spread([f.recall_no_also for f in figures]),
        }
    held_out = []
    for fold in range(folds):
        trained = {name: fold_figures(pool([r for i, r in enumerate(results) if i != fold])) for name, results in runs.items()}
        chosen = choose(trained, min_saving=min_saving, max_awareness=max_awareness)
        held_out.append({"fold": fold, "chosen": chosen, **_as_dict(per_fold[chosen][fold])})
    return {
        "folds": folds,
        "targets": {"min_saving": min_saving, "max_awareness_tokens_per_call": max_awareness},
        "configs": configs,
        "cross_validated": {
            "per_fold": held_out,
            "recall": _spread([row["recall"] for row in held_out]),
            "saving": _spread([row["saving"] for row in held_out]),
            "awareness_tokens_per_call": _spread([row["awareness"] for row in held_out]),
        },
    }


def _as_dict(figures: FoldFigures) -> dict[str, Any]:
    return {item.name: getattr(figures, item.name) for item in fields(FoldFigures)}


def _mean_range(spread: dict[str, float | None], as_pct: bool = True) -> str:
    if spread["mean"] is None:
        return "-"
    fmt = _report.pct if as_pct else (lambda v: f"{v:.1f}")
    return f"{fmt(spread['mean'])} ({fmt(spread['min'])}-{fmt(spread['max'])})"


@click.command("awareness")
@click.option("--format", "fmt", type=click.Choice(["multiwoz", "sgd"]), required=True, help="dataset format of PATH")
@click.argument("path", type=click.Path(exists=True))
@click.option("--chain", type=int, default=3, show_default=True, help="dialogues in a row forming one customer's chat")
@click.option("--routes", type=click.Choice(["gold", "predicted"]), default="predicted", show_default=True, help="dataset labels or the local router")
@click.option("--limit", type=int, default=None, help="only the first N dialogues")
@click.option("--folds", type=click.IntRange(2, 50), default=5, show_default=True, help="folds of chats")
@click.option("--views", default=",".join(VIEWS), show_default=True, help="awareness views to compare, comma-separated")
@click.option("--budgets", default=str(DEFAULT_BUDGET), show_default=True, help="awareness budgets (tokens) to compare, comma-separated")
@click.option("--min-saving", type=float, default=0.5, show_default=True, help="target: history+awareness saving at least this")
@click.option("--max-awareness", type=float, default=80.0, show_default=True, help="target: awareness tokens per call at most this")
@click.option("--json", "json_out", type=click.Path(dir_okay=False), default=None, help="write the report as JSON here")
@click.option("--quiet", is_flag=True, help="no progress on stderr")
@_report.report_option
def awareness_command(
    fmt: str,
    path: str,
    chain: int,
    routes: str,
    limit: int | None,
    folds: int,
    views: str,
    budgets: str,
    min_saving: float,
    max_awareness: float,
    json_out: str | None,
    quiet: bool,
) -> dict[str, Any]:
    """The awareness modes over folds of chats: mean and spread per view and budget, and the cross-validated choice."""
    from scopehub.hub.context.tokens import get_tokenizer

    from .replay import CachingTokenizer

    chosen_views = [v.strip() for v in views.split(",") if v.strip()]
    unknown = [v for v in chosen_views if v not in VIEWS]
    if unknown or not chosen_views:
        raise click.UsageError(f"--views: choose among {', '.join(VIEWS)}")
    try:
        chosen_budgets = [int(b) for b in budgets.split(",") if b.strip()]
    except ValueError:
        raise click.UsageError("--budgets: comma-separated whole numbers of tokens") from None
    if not chosen_budgets or any(b < 0 for b in chosen_budgets):
        raise click.UsageError("--budgets: comma-separated whole numbers of tokens")
    prepared = prepare(fmt, path, chain=chain, limit=limit)
    runs = cross_validate(
        prepared,
        folds=folds,
        configs=[(v, b) for v in chosen_views for b in chosen_budgets],
        tokenizer=CachingTokenizer(get_tokenizer()),
        routes=routes,
        chain=chain,
        show_progress=not quiet,
    )
    report = {
        "dataset": {"format": fmt, "path": str(path), "dialogues": len(prepared.dialogues), "chain": chain, "routes": routes},
        **report_folds(runs, min_saving=min_saving, max_awareness=max_awareness),
    }
    rows = []
    for name, figures in report["configs"].items():
        pooled = figures["pooled"]
        rows.append(
            [
                name,
                _report.pct(pooled["recall"]),
                _mean_range(figures["recall"]),
                _report.pct(pooled["saving"]),
                _mean_range(figures["saving"]),
                f"{pooled['awareness']:.1f}",
                _mean_range(figures["awareness_tokens_per_call"], as_pct=False),
                _report.pct(pooled["recall_no_also"]),
            ]
        )
    any_pooled = next(iter(report["configs"].values()))["pooled"]
    click.echo(
        _report.format_table(
            [
                "view@budget", "recall", "over folds", "hist+aware saving", "over folds",
                "aware tok/call", "over folds", "recall, no also_sees",
            ],
            rows,
            title=(
                f"Awareness over {folds} folds: {fmt} {len(prepared.dialogues)} dialogues, chain {chain}, {routes} routes; "
                f"scoped + awareness ({any_pooled['references']} references; scoped alone recalls {_report.pct(any_pooled['scoped_recall'])}); "
                "over folds: mean (min-max)"
            ),
        )
    )
    cv = report["cross_validated"]
    picks = ", ".join(row["chosen"] for row in cv["per_fold"])
    click.echo(
        f"\nchosen on the other folds ({picks}), scored on the held-out fold: recall {_mean_range(cv['recall'])}, "
        f"history+awareness saving {_mean_range(cv['saving'])}, awareness {_mean_range(cv['awareness_tokens_per_call'], as_pct=False)} tokens/call "
        f"(sd: recall {cv['recall']['sd']}, saving {cv['saving']['sd']})"
    )
    if json_out:
        _report.write_json(json_out, report)
        click.echo(f"wrote {json_out}")
    return report
