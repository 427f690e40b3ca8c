"""The agents of a replay: a stand-in for each dataset domain, their prompts, and a
tokenizer that counts each distinct text once."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from pydantic import BaseModel, Field

from scopehub.agents import AgentSpec, Tool
from scopehub.hub.context import (
    AgentPrompt,
)
from scopehub.hub.context.tokens import Tokenizer


class _FindArgs(BaseModel):
    query: str
    filters: dict[str, str] = Field(default_factory=dict, description="area, price, day, time, people...")


class _BookArgs(BaseModel):
    item: str = Field(description="name or id")
    details: dict[str, str] = Field(default_factory=dict, description="day, time, people, nights...")


class _CancelArgs(BaseModel):
    reference: str


def _never_run(ctx: Any, args: Any) -> str:  # replays build prompts, they never call tools
    return "not available in a replay"


def domain_agent(name: str, description: str = "") -> AgentSpec:
    """An agent for one dataset domain, shaped like the hub's real agents (persona, 3 tools)."""
    title = name.replace("_", " ")
    return AgentSpec(
        name=name,
        description=description or f"{title} requests",
        # As long as the hub's own agents' instructions (about 40 words at most): what a
        # call really carries, not a padded stand-in.
        instructions=(
            f"Find {title} options that match what the person asks and book or cancel them with your tools. "
            "Ask for one missing detail at a time, confirm before booking, and quote names, times and "
            "reference numbers exactly."
        ),
        tools=(
            Tool(name=f"find_{name}", description=f"Search {title} options.", args=_FindArgs, func=_never_run),
            Tool(name=f"book_{name}", description=f"Book a {title} option.", args=_BookArgs, func=_never_run),
            Tool(name=f"cancel_{name}", description=f"Cancel a {title} booking.", args=_CancelArgs, func=_never_run),
        ),
    )


def agent_prompts(agents: Iterable[str], descriptions: dict[str, str]) -> tuple[dict[str, AgentPrompt], dict[str, AgentSpec]]:
    """Prompts per agent: the hub's real agent when one has the name, else a domain agent."""
    from scopehub.agents import discover_agents
    from scopehub.hub.context.prompt import agent_prompt

    registry = discover_agents()
    specs: dict[str, AgentSpec] = {}
    for name in sorted(set(agents)):
        specs[name] = registry[name] if name in registry else domain_agent(name, descriptions.get(name, ""))
    return {name: agent_prompt(spec) for name, spec in specs.items()}, specs


class CachingTokenizer:
    """Counts each distinct text once: a replay renders the same messages thousands of times."""

    def __init__(self, base: Tokenizer) -> None:
        self.base = base
        self.name = getattr(base, "name", "tokenizer")
        self._counts: dict[str, int] = {}
        self._cuts: dict[tuple[str, int], str] = {}

    def count(self, text: str) -> int:
        cached = self._counts.get(text)
        if cached is None:
            cached = self._counts[text] = self.base.count(text)
        return cached

    def truncate(self, text: str, max_tokens: int) -> str:
        if self.count(text) <= max_tokens:
            return text
        key = (text, max_tokens)
        cut = self._cuts.get(key)
        if cut is None:
            cut = self._cuts[key] = self.base.truncate(text, max_tokens)
        return cut
