"""Simulation: scoping saving over N agents on a small synthetic pool, and the command."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from scopehub.eval.simulate import SimulationResult, load_pool, simulate, summarize
from scopehub.hub.cli import cli
from tests.eval.test_replay import WordTokenizer, write_multiwoz

POOL = [(f"user message number {n} about things", f"reply {n}") for n in range(50)]


def test_one_agent_saves_nothing() -> None:
    result = simulate(POOL, agents=1, turns=60, tokenizer=WordTokenizer())
    assert result.saving == 0.0
    assert result.switches == 0


def test_saving_grows_with_agents_and_is_deterministic() -> None:
    savings = [simulate(POOL, agents=n, turns=300, tokenizer=WordTokenizer()).saving for n in (2, 3, 10)]
    assert 0 < savings[0] < savings[1] < savings[2] < 1
    again = simulate(POOL, agents=3, turns=300, tokenizer=WordTokenizer())
    assert again.saving == savings[1]
    other_seed = simulate(POOL, agents=3, turns=300, tokenizer=WordTokenizer(), seed=7)
    assert other_seed.saving != savings[1]


def test_runs_follow_the_mean_length() -> None:
    long_runs = simulate(POOL, agents=5, turns=600, run_mean=10, tokenizer=WordTokenizer())
    short_runs = simulate(POOL, agents=5, turns=600, run_mean=1, tokenizer=WordTokenizer())
    assert short_runs.switches == 599  # a run of one turn: every turn switches
    assert 30 <= long_runs.switches <= 90
    assert short_runs.saving > long_runs.saving  # staying with one agent keeps its history


def test_window_first_bounds_the_full_history() -> None:
    result = simulate(POOL, agents=4, turns=100, window=10, tail=2, tokenizer=WordTokenizer())
    report = summarize(result)
    assert report["history_messages_per_call"]["full"] <= 10
    assert report["history_messages_per_call"]["scoped"] < report["history_messages_per_call"]["full"]


def test_summarize_pools_seeds_by_their_totals() -> None:
    runs = [simulate(POOL, agents=3, turns=100, seed=seed, tokenizer=WordTokenizer()) for seed in range(3)]
    report = summarize(runs)
    full, scoped = sum(r.full_history for r in runs), sum(r.scoped_history for r in runs)
    assert report["saving"] == round(1 - scoped / full, 4)
    assert report["history_tokens_per_call"] == {"full": round(full / 300, 1), "scoped": round(scoped / 300, 1)}
    assert (report["saving_min"], report["saving_max"]) == (round(min(r.saving for r in runs), 4), round(max(r.saving for r in runs), 4))
    assert report["switches"] == sum(r.switches for r in runs)
    # Pooled over calls, not a mean of ratios: a seed with ten times the history weighs ten times.
    big = SimulationResult(agents=3, turns=10, full_history=1000, scoped_history=100)
    small = SimulationResult(agents=3, turns=10, full_history=100, scoped_history=90)
    assert summarize([big, small])["saving"] == round(1 - 190 / 1100, 4) != round((big.saving + small.saving) / 2, 4)


def test_more_agents_save_more_on_every_seed() -> None:
    for seed in range(3):
        savings = [simulate(POOL, agents=n, turns=100, seed=seed, tokenizer=WordTokenizer()).saving for n in (1, 2, 3, 10)]
        assert savings[0] == 0 and savings == sorted(set(savings)), (seed, savings)


def test_errors() -> None:
    with pytest.raises(ValueError):
        simulate(POOL, agents=0, tokenizer=WordTokenizer())
    with pytest.raises(ValueError):
        simulate([], agents=2, tokenizer=WordTokenizer())


def test_pool_from_multiwoz(tmp_path: Path) -> None:
    pool = load_pool(write_multiwoz(tmp_path))
    assert pool[0] == ("I need a cheap hotel in the north .", "The acorn guest house is cheap . Book it ?")
    assert len(pool) == 4


def test_simulate_command_writes_json_and_plot(tmp_path: Path) -> None:
    data = write_multiwoz(tmp_path)
    out = tmp_path / "sim.json"
    args = ["eval", "simulate", "--agents", "3", "--turns", "120", "--data", str(data), "--json", str(out), "--sweep", "4"]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    report = json.loads(out.read_text())
    assert report["agents"] == 3 and report["turns"] == 120
    assert 0 < report["saving"] < 1
    assert [row["agents"] for row in report["sweep"]] == [1, 2, 3, 4]
    assert "history saving" in result.output


def test_simulate_plot(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    data = write_multiwoz(tmp_path)
    result = CliRunner().invoke(cli, ["eval", "simulate", "--agents", "3", "--turns", "60", "--data", str(data), "--plots", str(tmp_path / "p"), "--sweep", "3"])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "p" / "simulate_saving.png").read_bytes()[:4] == b"\x89PNG"
