"""Simulation: how much scoping saves as the number of agents grows.

``agents-hub eval simulate --agents N --turns 600 [--json OUT] [--data PATH]``

Real dataset messages (MultiWOZ or SGD user turns with the system reply that followed,
a JSONL chat log's user turns and replies, or CLINC150 utterances with no reply) are
replayed as one chat of ``--turns`` user turns, spread over N agents in *runs*: a run
stays with one agent for a geometric number of turns (mean ``--run-mean``, 3), then the
conversation switches to another agent chosen uniformly among the others, the way a
person finishes one errand before the next. Every message carries its agent's tag (the
simulation measures scoping, not routing). For each user turn the real context builder
gives the scoped history (window first, tag filter, tail) and the full window;
``saving`` is ``1 - scoped / full`` over all calls. Deterministic for a ``--seed``.

Awareness: each reply's annotated dialogue acts (MultiWOZ, SGD) are emitted as
``dialogue.act`` events by the agent that sent it, and every call is shown the hub's
awareness block (see :mod:`eval.awareness_replay`; ``--awareness-view``, budget
``HUB_AWARENESS_TOKENS``). Its cost is reported as tokens per call, and the saving of
history plus awareness against the full history.

The data default is ``$HUB_DATA_DIR`` or ``../shared/data``: MultiWOZ val if present,
else CLINC150.
"""

from __future__ import annotations

import os
import random
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

from scopehub.hub.context import AgentPrompt, build_context, select_history
from scopehub.hub.context.tokens import Tokenizer
from scopehub.memory import Message

from . import _report
from .awareness_replay import DEFAULT_BUDGET, VIEWS, AwarenessReplay
from .loaders import Act
from .replay import CachingTokenizer

__all__ = ["default_data", "load_pool", "simulate", "simulate_command"]

Pair = tuple[str, str | None]  # a user message and the reply that followed (None: no reply)
# With the reply's annotated acts (load_pool(acts=True)): they become awareness events.
PairWithActs = tuple[str, str | None, tuple[Act, ...]]


def default_data() -> Path | None:
    """MultiWOZ val, else CLINC150, under HUB_DATA_DIR or ../shared/data (None when absent)."""
    roots = [Path(os.environ["HUB_DATA_DIR"])] if os.environ.get("HUB_DATA_DIR") else []
    roots += [Path.cwd().parent / "shared" / "data", Path(__file__).resolve().parents[2] / "shared" / "data"]
    for root in roots:
        for candidate in (root / "multiwoz21" / "val.json.gz", root / "multiwoz21" / "val.json", root / "clinc150" / "data_dev.json"):
            if candidate.exists():
                return candidate
    return None


def _guess_format(path: Path) -> str:
    if path.is_dir():
        return "sgd"
    name = path.name.removesuffix(".gz")
    if name.endswith(".jsonl"):
        return "jsonl"
    if name.startswith("data_") or "clinc" in str(path).lower():
        return "clinc"
    return "multiwoz"


def load_pool(path: str | Path, fmt: str = "auto", *, limit: int = 20_000, acts: bool = False) -> list[Any]:
    """(user message, reply) pairs from a dataset, in the dataset's order; with ``acts``,
    (user message, reply, the reply's annotated acts) triples."""
    from .loaders import load_clinc, load_jsonl, load_multiwoz, load_sgd

    target = Path(path)
    fmt = _guess_format(target) if fmt == "auto" else fmt
    if fmt == "clinc":
        return [((text, None, ()) if acts else (text, None)) for text, _ in load_clinc(target, "val")][:limit]
    dialogues = {"multiwoz": load_multiwoz, "sgd": load_sgd, "jsonl": load_jsonl}[fmt](target)
    pairs: list[Any] = []
    for dialogue in dialogues:
        turns = dialogue.turns
        for index, turn in enumerate(turns):
            if turn.role != "user":
                continue
            answer = turns[index + 1] if index + 1 < len(turns) and turns[index + 1].role != "user" else None
            reply = answer.text if answer is not None else None
            pairs.append((turn.text, reply, answer.acts if answer is not None else ()) if acts else (turn.text, reply))
            if len(pairs) >= limit:
                return pairs
    return pairs


@dataclass
class SimulationResult:
    """Sums over the simulated calls."""

    agents: int
    turns: int
    full_history: int = 0
    scoped_history: int = 0
    full_messages: int = 0
    scoped_messages: int = 0
    other_agent_messages: int = 0
    switches: int = 0
    awareness_tokens: int = 0  # the awareness blocks shown, summed over calls

    @property
    def awareness_saving(self) -> float:
        """History plus awareness against the full history."""
        return 1 - (self.scoped_history + self.awareness_tokens) / self.full_history if self.full_history else 0.0

    @property
    def saving(self) -> float:
        return 1 - self.scoped_history / self.full_history if self.full_history else 0.0


def simulate(
    pool: Sequence[Pair | PairWithActs],
    *,
    agents: int,
    turns: int = 600,
    run_mean: float = 3.0,
    window: int = 40,
    tail: int = 4,
    seed: int = 0,
    tokenizer: Tokenizer,
    awareness_view: str = "interests",
    awareness_budget: int = DEFAULT_BUDGET,
) -> SimulationResult:
    """One simulated chat of ``turns`` user turns over ``agents`` agents.

    Pool items with acts (see :func:`load_pool`) make each reply emit its acts as events,
    and every call is shown the awareness block of ``awareness_view``.
    """
    if agents < 1:
        raise ValueError("agents must be at least 1")
    if not pool:
        raise ValueError("no messages to simulate with")
    counter = tokenizer if isinstance(tokenizer, CachingTokenizer) else CachingTokenizer(tokenizer)
    rng = random.Random(seed)
    names = [f"agent{number + 1}" for number in range(agents)]
    prompts = {name: AgentPrompt(name=name, persona=f"You are {name}.") for name in names}
    # Start at a seeded place in the pool so that different seeds see different messages.
    start = rng.randrange(len(pool))
    switch_probability = 1.0 / max(run_mean, 1.0)
    result = SimulationResult(agents=agents, turns=turns)
    history: list[Message] = []
    aware = AwarenessReplay("user:simulation", agents=names, tokenizer=counter, view=VIEWS[awareness_view], budget=awareness_budget)
    current = rng.choice(names)
    for number in range(turns):
        if number and agents > 1 and rng.random() < switch_probability:
            current = rng.choice([name for name in names if name != current])
            result.switches += 1
        text, reply, *rest = pool[(start + number) % len(pool)]
        recent = history[-window:] if window > 0 else []
        # The hub's block: nothing the history shows, earlier events while the talk names them.
        shown = aware.block(
            current,
            now=len(history) * 30.0,
            visible=frozenset(m.id for m in select_history(recent, current, window=window, tail=tail)),
            talk=[m.text for m in (recent[-tail:] if tail > 0 else [])] + [text],
            since_message=recent[0].id if recent else None,
        )
        result.awareness_tokens += counter.count(shown.text) if shown.text else 0
        aware.record(current, shown)
        context = build_context(prompts[current], history[-window:], text, tokenizer=counter, window=window, tail=tail)
        fixed = context.tokens["total"] - context.tokens["history"]
        result.scoped_history += context.tokens["history"]
        result.full_history += context.full_history_tokens - fixed
        result.scoped_messages += len(context.history)
        result.full_messages += min(len(history), window)
        result.other_agent_messages += sum(1 for m in context.history if m.agent != current)
        history.append(_message(len(history), "user", text, current))
        if reply is not None:
            history.append(_message(len(history), "agent", reply, current))
            aware.emit(rest[0] if rest else (), agent=current, ts=history[-1].ts, message_id=history[-1].id)
    return result


def _message(index: int, role: str, text: str, agent: str) -> Message:
    return Message(id=index + 1, scope="user:simulation", role=role, text=text, ts=index * 30.0, agent=agent)


def summarize(results: SimulationResult | Sequence[SimulationResult]) -> dict[str, Any]:
    """The JSON figures of one simulation, or of several seeds pooled (sums over all calls)."""
    runs = [results] if isinstance(results, SimulationResult) else list(results)
    calls = max(sum(r.turns for r in runs), 1)
    full = sum(r.full_history for r in runs)
    scoped = sum(r.scoped_history for r in runs)
    report: dict[str, Any] = {
        "agents": runs[0].agents,
        "turns": runs[0].turns,
        "saving": round(1 - scoped / full, 4) if full else 0.0,
        "history_tokens_per_call": {"full": round(full / calls, 1), "scoped": round(scoped / calls, 1)},
        "history_messages_per_call": {
            "full": round(sum(r.full_messages for r in runs) / calls, 2),
            "scoped": round(sum(r.scoped_messages for r in runs) / calls, 2),
        },
        "other_agent_messages_per_call": round(sum(r.other_agent_messages for r in runs) / calls, 2),
        "switches": sum(r.switches for r in runs),
        "awareness_tokens_per_call": round(sum(r.awareness_tokens for r in runs) / calls, 1),
        "history_awareness_saving": round(1 - (scoped + sum(r.awareness_tokens for r in runs)) / full, 4) if full else 0.0,
    }
    if len(runs) > 1:
        savings = [r.saving for r in runs]
        report["saving_min"] = round(min(savings), 4)
        report["saving_max"] = round(max(savings), 4)
    return report


@click.command("simulate")
@click.option("--agents", "agent_count", type=click.IntRange(1, 100), default=3, show_default=True, help="agents sharing the chat")
@click.option("--turns", type=click.IntRange(1, 1_000_000), default=600, show_default=True, help="user turns to simulate")
@click.option("--data", "data_path", type=click.Path(exists=True), default=None, help="dataset giving the messages [default: HUB_DATA_DIR or ../shared/data]")
@click.option("--format", "fmt", type=click.Choice(["auto", "multiwoz", "sgd", "jsonl", "clinc"]), default="auto", show_default=True, help="format of --data")
@click.option("--run-mean", type=click.FloatRange(1.0, 1000.0), default=3.0, show_default=True, help="mean turns in a row for one agent")
@click.option("--window", default=40, show_default=True, help="HUB_WINDOW")
@click.option("--tail", default=4, show_default=True, help="HUB_TAIL")
@click.option("--seed", default=0, show_default=True, help="random seed")
@click.option("--repeats", type=click.IntRange(1, 100), default=1, show_default=True, help="average this many seeds (seed, seed+1, ...)")
@click.option("--sweep", "sweep_max", type=int, default=None, help="also simulate 1..M agents (default with --plots: 12)")
@click.option("--json", "json_out", type=click.Path(dir_okay=False), default=None, help="write the report as JSON here")
@click.option("--plots", "plots_dir", type=click.Path(file_okay=False), default=None, help="write a PNG of saving against agents here")
@click.option("--awareness-view", type=click.Choice(sorted(VIEWS)), default="interests", show_default=True, help="what every agent declares for its awareness block (see eval tokens)")
@click.option("--awareness-tokens", type=click.IntRange(0, 5_000), default=DEFAULT_BUDGET, show_default=True, envvar="HUB_AWARENESS_TOKENS", help="HUB_AWARENESS_TOKENS: budget of the awareness block")
@_report.report_option
def simulate_command(
    agent_count: int,
    turns: int,
    data_path: str | None,
    fmt: str,
    run_mean: float,
    window: int,
    tail: int,
    seed: int,
    repeats: int,
    sweep_max: int | None,
    json_out: str | None,
    plots_dir: str | None,
    awareness_view: str,
    awareness_tokens: int,
) -> dict[str, Any]:
    """Spread dataset messages over N agents in conversation runs; history saving of scoping and the awareness cost."""
    from scopehub.hub.context.tokens import get_tokenizer

    if plots_dir:
        from .plots import require_matplotlib

        require_matplotlib()
    source = Path(data_path) if data_path else default_data()
    if source is None:
        raise click.UsageError("no data: pass --data PATH or set HUB_DATA_DIR to the shared data folder")
    pool = load_pool(source, fmt, acts=True)
    tokenizer = CachingTokenizer(get_tokenizer())

    def run(count: int) -> dict[str, Any]:
        runs = [
            simulate(
                pool, agents=count, turns=turns, run_mean=run_mean, window=window, tail=tail, seed=seed + r, tokenizer=tokenizer,
                awareness_view=awareness_view, awareness_budget=awareness_tokens,
            )
            for r in range(repeats)
        ]
        return summarize(runs)

    report: dict[str, Any] = {
        "data": str(source),
        "run_mean": run_mean,
        "window": window,
        "tail": tail,
        "seed": seed,
        "repeats": repeats,
        "awareness_view": awareness_view,
        "awareness_budget": awareness_tokens,
        **run(agent_count),
    }
    if sweep_max is None and plots_dir:
        sweep_max = 12
    if sweep_max:
        counts = list(range(1, sweep_max + 1))
        report["sweep"] = [
            {"agents": row["agents"], "saving": row["saving"]}
            for row in (run(count) for count in _report.progress(counts, "simulate"))
        ]
    rows = [[row["agents"], _report.pct(row["saving"])] for row in report.get("sweep", [])] or [
        [report["agents"], _report.pct(report["saving"])]
    ]
    click.echo(
        _report.format_table(
            ["agents", "history saving"],
            rows,
            title=f"Simulation: {turns} turns, runs of ~{run_mean:g} turns, window {window}, tail {tail} ({source.name})",
        )
    )
    tokens = report["history_tokens_per_call"]
    click.echo(
        f"\n{agent_count} agents: history {tokens['full']:.0f} -> {tokens['scoped']:.0f} tokens per call, "
        f"saving {_report.pct(report['saving'])}"
        + (f" (seeds {seed}..{seed + repeats - 1}: {_report.pct(report['saving_min'])} to {_report.pct(report['saving_max'])})" if repeats > 1 else "")
        + "; reference design: 50.6% with 3 agents, 81% with 10"
    )
    click.echo(
        f"awareness (view '{awareness_view}', budget {awareness_tokens}): {report['awareness_tokens_per_call']:.1f} tokens per call; "
        f"history + awareness saving {_report.pct(report['history_awareness_saving'])}"
    )
    if json_out:
        _report.write_json(json_out, report)
        click.echo(f"wrote {json_out}")
    if plots_dir:
        from .plots import plot_simulation

        for written in plot_simulation(report, plots_dir):
            click.echo(f"wrote {written}")
    return report
