"""PNG charts of the evaluations (optional: ``pip install 'agents-hub[plots]'``).

matplotlib is imported only here and only when a chart is asked for, with the
non-interactive Agg backend so that it works without a display.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

__all__ = ["plot_replay", "plot_simulation", "require_matplotlib"]

_MODE_LABELS = {
    "full": "full",
    "scoped_no_also": "scoped\nno also_sees",
    "scoped": "scoped",
    "filter_first": "filter first\n(pitfall)",
    "oracle": "oracle",
}


def require_matplotlib() -> Any:
    """``matplotlib.pyplot`` on the Agg backend, or a clear error naming the extra."""
    try:
        import matplotlib
    except ImportError:
        raise click.ClickException("--plots needs matplotlib: pip install 'agents-hub[plots]'") from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_replay(report: dict[str, Any], out_dir: str | Path) -> list[Path]:
    """Two panels: history and request saving by mode; reference recall by mode."""
    plt = require_matplotlib()
    folder = Path(out_dir)
    folder.mkdir(parents=True, exist_ok=True)
    modes = [mode for mode in _MODE_LABELS if mode in report["modes"]]
    figures = [report["modes"][mode] for mode in modes]
    labels = [_MODE_LABELS[mode] for mode in modes]
    positions = list(range(len(modes)))
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.8))
    width = 0.38
    history = [100 * f["history_saving"] for f in figures]
    request = [100 * f["request_saving"] for f in figures]
    bars = left.bar([p - width / 2 for p in positions], history, width, label="history", color="#3b75af")
    left.bar_label(bars, fmt="%.0f%%", fontsize=8)
    bars = left.bar([p + width / 2 for p in positions], request, width, label="whole request", color="#9ecae9")
    left.bar_label(bars, fmt="%.0f%%", fontsize=8)
    left.set_xticks(positions, labels, fontsize=8)
    left.set_ylabel("tokens saved vs full (%)")
    left.set_ylim(0, 105)
    left.set_title("Saving by mode")
    left.legend(loc="upper left", fontsize=8)
    recall = [100 * (f["reference_recall"] or 0.0) for f in figures]
    bars = right.bar(positions, recall, 0.6, color="#55a868")
    right.bar_label(bars, fmt="%.0f%%", fontsize=8)
    right.set_xticks(positions, labels, fontsize=8)
    right.set_ylabel("references kept in context (%)")
    right.set_ylim(0, 105)
    right.set_title(f"Reference recall ({report.get('references', 0):,} references)")
    data = report.get("dataset", {})
    fig.suptitle(
        f"{data.get('format', '')}: {data.get('dialogues', '?')} dialogues, chain {data.get('chain', '?')}, "
        f"{data.get('routes', '?')} routes, {report.get('calls', 0):,} calls",
        fontsize=10,
    )
    fig.tight_layout()
    path = folder / "tokens_by_mode.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return [path]


def plot_simulation(report: dict[str, Any], out_dir: str | Path) -> list[Path]:
    """History saving against the number of agents (the sweep of ``eval simulate``)."""
    plt = require_matplotlib()
    folder = Path(out_dir)
    folder.mkdir(parents=True, exist_ok=True)
    sweep = report.get("sweep") or [{"agents": report["agents"], "saving": report["saving"]}]
    agents = [row["agents"] for row in sweep]
    saving = [100 * row["saving"] for row in sweep]
    fig, axis = plt.subplots(figsize=(7, 4.5))
    axis.plot(agents, saving, marker="o", color="#3b75af", label="simulated (scoped vs full history)")
    for x, y in zip(agents, saving, strict=True):
        axis.annotate(f"{y:.0f}%", (x, y), textcoords="offset points", xytext=(0, 7), ha="center", fontsize=8)
    axis.scatter([3, 10], [50.6, 81.0], marker="x", color="#c44e52", zorder=3, label="reference design")
    axis.set_xlabel("agents")
    axis.set_ylabel("history tokens saved (%)")
    axis.set_ylim(0, 100)
    axis.set_xticks(agents)
    axis.grid(alpha=0.3)
    axis.legend(loc="lower right", fontsize=8)
    axis.set_title(
        f"Scoping saving vs number of agents ({report.get('turns', '?')} turns, runs of ~{report.get('run_mean', '?')} turns)",
        fontsize=10,
    )
    fig.tight_layout()
    path = folder / "simulate_saving.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return [path]
