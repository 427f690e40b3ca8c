"""One-file agents: a broken module is reported by name, a new file is routed to by its examples."""

from __future__ import annotations

import asyncio
import sys
import textwrap
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from agents import discover_agents, load_agent_file
from hub.hub import Deps, Hub, Inbound
from hub.llm import ModelResponse, ScriptedModel, ToolCall
from hub.settings import load_settings
from memory import Store

# The example of docs/adding-an-agent.md, verbatim.
WEATHER_AGENT = '''
"""``weather``: forecasts for a city (an example agent in one file)."""

from pydantic import BaseModel, Field

from agents import AgentSpec, ToolContext, tool


class ForecastArgs(BaseModel):
    city: str
    day: str = Field("today", description="today, tomorrow or a weekday")


@tool
def forecast(ctx: ToolContext, args: ForecastArgs) -> str:
    """Get the weather forecast for a city."""
    return f"{args.city}, {args.day}: sunny, 21 C"  # call your weather service here


agent = AgentSpec(
    name="weather",
    description="Weather forecasts: temperature, rain, wind for a city and day.",
    instructions="Answer weather questions with the forecast tool. Give the city and day you looked up.",
    examples=(
        "what's the weather in Paris",
        "will it rain tomorrow",
        "do I need an umbrella today",
        "how warm will it be on saturday",
        "forecast for Berlin this weekend",
        "is it going to snow",
        "how windy is it at the coast",
        "temperature in London tomorrow",
        "will it be sunny for the picnic",
        "weather forecast please",
    ),
    keywords=("weather", "forecast", "rain", "umbrella", "temperature", "sunny", "snow"),
    tools=(forecast,),
)
'''


@pytest.fixture
def plugin_package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A temporary agents package: one good module, one that fails to import, one without an agent."""
    name = f"plugins_{uuid.uuid4().hex[:8]}"
    root = tmp_path / name
    root.mkdir()
    (root / "__init__.py").write_text("")
    (root / "weather.py").write_text(WEATHER_AGENT)
    (root / "broken.py").write_text("import a_module_that_does_not_exist\n")
    (root / "empty.py").write_text("VALUE = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    yield name
    for module in [m for m in sys.modules if m == name or m.startswith(name + ".")]:
        del sys.modules[module]


def test_broken_module_is_reported_by_name_and_the_others_load(plugin_package: str) -> None:
    registry = discover_agents(package=plugin_package, entry_point_group=None)
    assert registry.names == ("weather",)
    assert set(registry.errors) == {f"{plugin_package}.broken", f"{plugin_package}.empty"}
    assert "ModuleNotFoundError" in registry.errors[f"{plugin_package}.broken"]
    assert "a_module_that_does_not_exist" in registry.errors[f"{plugin_package}.broken"]
    assert "no AgentSpec" in registry.errors[f"{plugin_package}.empty"]


def test_broken_file_next_to_the_builtin_agents(tmp_path: Path) -> None:
    broken = tmp_path / "broken_agent.py"
    broken.write_text("raise RuntimeError('config missing')\n")
    registry = discover_agents(extra_files=[broken])
    assert {"general", "tasks", "notes", "inbox", "reminders"} <= set(registry.names)
    assert registry.errors == {str(broken): "RuntimeError: config missing"}


def test_a_new_agent_file_is_routed_to_by_its_examples(tmp_path: Path) -> None:
    path = tmp_path / "weather.py"
    path.write_text(textwrap.dedent(WEATHER_AGENT))
    registry = load_agent_file(path, discover_agents())
    assert "weather" in registry and not registry.errors
    model = ScriptedModel(
        steps=[
            ModelResponse(tool_calls=(ToolCall("c1", "forecast", '{"city": "Paris", "day": "tomorrow"}'),)),
            "Sunny in Paris tomorrow, 21 C.",
        ]
    )
    store = Store(tmp_path / "hub.db")
    hub = Hub(Deps(store=store, settings=load_settings(), model=model), registry)

    reply = asyncio.run(hub.handle(Inbound(scope="user:7", text="will it rain in Paris tomorrow?", chat="7")))

    assert reply is not None
    assert (reply.agent, reply.via, reply.text) == ("weather", "local", "Sunny in Paris tomorrow, 21 C.")
    first = model.calls[0]
    assert first.messages[0]["content"].startswith("You are the weather agent.")
    assert [t["function"]["name"] for t in first.tools] == ["forecast", "search_memory"]
    assert model.calls[1].messages[-1] == {"role": "tool", "tool_call_id": "c1", "content": "Paris, tomorrow: sunny, 21 C"}
    stored = store.messages("user:7")
    assert [(m.role, m.agent) for m in stored] == [("user", "weather"), ("agent", "weather")]
    store.close()
