"""One-file agents: a broken module is reported by name, a new file is routed to by its examples."""

from __future__ import annotations

import asyncio
import sys
import textwrap
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from pydantic import BaseModel

from scopehub.agents import ToolContext, ToolExample, discover_agents, load_agent_file, tool
from scopehub.hub.models import ModelResponse, ToolCall
from scopehub.hub.models.testing import ScriptedModel
from scopehub.hub.orchestrator import Deps, Hub, Inbound
from scopehub.hub.settings import load_settings
from scopehub.memory import Store


def _documented_example() -> str:
    """The one-file agent of the docs' "A complete example" (docs/agents.md), so the documented example is the tested one."""
    page = (Path(__file__).resolve().parents[2] / "docs" / "agents.md").read_text(encoding="utf-8")
    section = page.split("## A complete example", 1)[1]
    return section.split("```python\n", 1)[1].split("```", 1)[0]


WEATHER_AGENT = _documented_example()


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
    # search_memory is offered only when the message may need the archive; this one does not.
    assert [t["function"]["name"] for t in first.tools] == ["forecast"]
    assert model.calls[1].messages[-1] == {"role": "tool", "tool_call_id": "c1", "content": "Paris, tomorrow: sunny, 21 C"}
    stored = store.messages("user:7")
    assert [(m.role, m.agent) for m in stored] == [("user", "weather"), ("agent", "weather")]
    store.close()



class _CityArgs(BaseModel):
    city: str


@tool(examples=("weather please", ("weather in Paris", {"city": "Paris"}), ("and there?", {"city": "Rome"}, "Rome is sunny")))
def _forecast(ctx: ToolContext, args: _CityArgs) -> str:
    """Get the forecast."""
    return args.city


def test_a_tool_declares_examples_as_words_or_words_with_arguments() -> None:
    plain, demo, referring = _forecast.examples
    assert plain == ToolExample("weather please") and plain.args is None
    assert (demo.text, demo.args, demo.earlier) == ("weather in Paris", {"city": "Paris"}, "")
    assert (referring.args, referring.earlier) == ({"city": "Rome"}, "Rome is sunny")
    assert hash(_forecast)  # a tool stays a hashable, frozen declaration


def test_the_router_reads_an_agents_tools_examples_as_its_own() -> None:
    from scopehub.agents import AgentSpec

    spec = AgentSpec(name="weather", description="Weather.", instructions="Be brief.", examples=("is it raining", "weather please"), tools=(_forecast,))
    # Its own first, then the tools' (no repeats): what agent_profile gives the router.
    assert spec.examples == ("is it raining", "weather please", "weather in Paris", "and there?")
