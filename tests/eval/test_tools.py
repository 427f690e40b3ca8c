"""Tool offer: the tool a message needs is among those its call is offered."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from scopehub.eval.tools import tool_offer_report
from scopehub.hub.cli import cli
from scopehub.hub.context import refers_to_past, wants_archive


def test_messages_that_reach_back_are_offered_search_and_plain_requests_are_not() -> None:
    reaching_back = [
        "what did we talk about last week",
        "what was the address you gave me yesterday?",
        "remember the plumber's number I sent you?",
        "find my note about the wifi",
        "when did I book the dentist",
        "the email from HR a few days ago, what did it say",
    ]
    plain = [
        "add buy milk to my tasks",
        "remind me in 10 minutes to check the oven",
        "I need a train to Cambridge that arrives before 15:00",
        "Thanks again, that was all I needed.",
        "I was hoping to book a table for two",
    ]
    assert all(refers_to_past(text) for text in reaching_back)
    assert not any(refers_to_past(text) for text in plain)
    assert wants_archive("add buy milk", recent=40, window=40)  # older messages exist beyond the window
    assert not wants_archive("add buy milk", recent=39, window=40)


def test_tool_offer_report_counts_each_set() -> None:
    report = tool_offer_report(
        questions=["What did Caroline say about the party last week?", "What is Melanie's dog called?"],
        examples={"tasks": ("add milk", "what did I add yesterday")},
        turns=["book a table", "a taxi please", "what was the reference number again?", "thanks"],
    )
    assert all(report["own_tools_offered_on_every_call"].values())
    assert report["locomo"]["offered_by_past_cue"] == 0.5
    assert report["locomo"]["missed_by_cue_examples"] == ["What is Melanie's dog called?"]
    assert report["agent_examples"]["offered"] == ["tasks: what did I add yesterday"]
    assert report["dataset_turns"]["offered_by_past_cue"] == 0.25


def test_eval_tools_prints_and_writes_the_figures(tmp_path: Path) -> None:
    out = tmp_path / "tools.json"
    result = CliRunner().invoke(cli, ["eval", "tools", "--json", str(out)])
    assert result.exit_code == 0, result.output
    assert "own tools offered on every call: 5 of 5 agents" in result.output
    assert "general: what did we talk about last week" in result.output
    report = json.loads(out.read_text())
    assert report["agent_examples"]["requests"] >= 50
