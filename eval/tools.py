"""Tool offer: is the tool a message needs among the tools its call is offered?

``agents-hub eval tools [--locomo PATH] [--format multiwoz|sgd PATH]``

An agent's own tools are offered on every call; only ``search_memory`` is optional
(:func:`hub.context.offer.wants_archive`: the window is full, or the message refers to the
past). Zero tokens, no model: what it measures is whether the needed tool is *offered*.

- LoCoMo questions ask about earlier sessions of a long chat, so each needs the archive:
  the share the past-cue rule offers it to on its own, and with the window rule (a LoCoMo
  chat holds hundreds of messages, far beyond the 40-message window).
- The agents' own example requests (written for the router, before this rule) need their
  own tools: the share offered ``search_memory`` anyway is tokens spent for nothing, and
  the ones that do reach back are listed so a reader can judge them.
- Dataset user turns (MultiWOZ, SGD): how often the past-cue rule fires on task requests.

The token replay (``eval tokens``) adds the other side: how often ``search_memory`` was
offered on the calls whose scoped context misses a message the answer refers to.
"""

from __future__ import annotations

from typing import Any

import click

from scopehub.hub.context import refers_to_past

from . import _report

__all__ = ["tool_offer_report", "tools_command"]


def tool_offer_report(
    *,
    questions: list[str] | None = None,
    examples: dict[str, tuple[str, ...]] | None = None,
    turns: list[str] | None = None,
) -> dict[str, Any]:
    """Offer figures for each set given (see module doc)."""
    from scopehub.agents import discover_agents
    from scopehub.hub.context import agent_prompt

    registry = discover_agents()
    own = {}
    for spec in registry:
        offered = {t["function"]["name"] for t in agent_prompt(spec).offered(False)}
        own[spec.name] = all(tool.name in offered for tool in spec.tools)
    report: dict[str, Any] = {"own_tools_offered_on_every_call": own}
    if questions is not None:
        cued = sum(refers_to_past(q) for q in questions)
        report["locomo"] = {
            "questions": len(questions),
            "offered_by_past_cue": round(cued / len(questions), 4) if questions else None,
            # Every LoCoMo chat is longer than the window, so the window rule offers it too.
            "offered_in_a_full_window": 1.0 if questions else None,
            "missed_by_cue_examples": [q for q in questions if not refers_to_past(q)][:5],
        }
    if examples is not None:
        flat = [(agent, text) for agent, texts in examples.items() for text in texts]
        offered = [(agent, text) for agent, text in flat if refers_to_past(text)]
        report["agent_examples"] = {
            "requests": len(flat),
            "offered_search_memory": round(len(offered) / len(flat), 4) if flat else None,
            "offered": [f"{agent}: {text}" for agent, text in offered],
        }
    if turns is not None:
        fired = sum(refers_to_past(text) for text in turns)
        report["dataset_turns"] = {"turns": len(turns), "offered_by_past_cue": round(fired / len(turns), 4) if turns else None}
    return report


@click.command("tools")
@click.option("--locomo", "locomo_path", type=click.Path(exists=True), default=None, help="LoCoMo JSON: its questions need the archive")
@click.option("--format", "fmt", type=click.Choice(["multiwoz", "sgd"]), default=None, help="dataset format of PATH")
@click.argument("path", type=click.Path(exists=True), required=False)
@click.option("--json", "json_out", type=click.Path(dir_okay=False), default=None, help="write the report as JSON here")
@_report.report_option
def tools_command(locomo_path: str | None, fmt: str | None, path: str | None, json_out: str | None) -> dict[str, Any]:
    """How often the tool a message needs is offered (search_memory is offered only when needed)."""
    from scopehub.agents import discover_agents

    if bool(fmt) != bool(path):
        raise click.UsageError("give --format with PATH (or neither)")
    questions = None
    if locomo_path:
        from .loaders import load_locomo

        questions = [q.question for conversation in load_locomo(locomo_path) for q in conversation.questions]
    turns = None
    if fmt and path:
        from .replay import load_dialogues

        dialogues, _ = load_dialogues(fmt, path)
        turns = [turn.text for dialogue in dialogues for turn in dialogue.turns if turn.role == "user"]
    examples = {spec.name: spec.examples for spec in discover_agents()}
    report = tool_offer_report(questions=questions, examples=examples, turns=turns)
    own = report["own_tools_offered_on_every_call"]
    click.echo(f"own tools offered on every call: {sum(own.values())} of {len(own)} agents")
    if "locomo" in report:
        figures = report["locomo"]
        click.echo(
            f"LoCoMo questions (need the archive): {figures['questions']:,}; search_memory offered by the past cue alone "
            f"{_report.pct(figures['offered_by_past_cue'])}, with the window rule {_report.pct(figures['offered_in_a_full_window'])}"
        )
    figures = report["agent_examples"]
    click.echo(
        f"agents' example requests: {figures['requests']}; search_memory offered to "
        f"{_report.pct(figures['offered_search_memory'])}" + "".join(f"\n  {line}" for line in figures["offered"])
    )
    if "dataset_turns" in report:
        figures = report["dataset_turns"]
        click.echo(f"{fmt} user turns: {figures['turns']:,}; past cue fires on {_report.pct(figures['offered_by_past_cue'])}")
    if json_out:
        _report.write_json(json_out, report)
        click.echo(f"wrote {json_out}")
    return report
