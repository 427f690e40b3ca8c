"""The tool loop, alone and through the Hub: what the model saw, what was stored, what the person got."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from pydantic import BaseModel

from scopehub import memory
from scopehub.agents import ToolContext, discover_agents, tool
from scopehub.hub.errors import ModelUnavailable
from scopehub.hub.models import LiteLLMModel, ModelResponse, ToolCall
from scopehub.hub.models.testing import ScriptedModel
from scopehub.hub.orchestrator import MODEL_DOWN_REPLY, Deps, Hub, Inbound
from scopehub.hub.runtime import (
    FINAL_STEP_NOTE,
    MAX_CALLS_PER_STEP,
    STEP_LIMIT_REPLY,
    TOOL_RESULT_CHARS,
    run_agent,
)
from scopehub.hub.settings import load_settings
from scopehub.memory import Store
from tests.agents.helpers import NOW, make_ctx
from tests.fakes.openai_server import FakeOpenAI, error, text, tool_call

TASK_TOOLS = ["add_task", "list_tasks", "complete_task", "edit_task"]  # search_memory: only when needed


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    db = Store(tmp_path / "hub.db")
    yield db
    db.close()


def make_hub(store: Store, model: object, **settings: object) -> Hub:
    return Hub(Deps(store=store, settings=load_settings(**settings), model=model, clock=lambda: NOW), discover_agents())


def ask(hub: Hub, text_: str, scope: str = "user:1"):
    return asyncio.run(hub.handle(Inbound(scope=scope, text=text_, chat="1")))


def calls_to(name: str, arguments: dict | str, call_id: str = "call_1") -> ModelResponse:
    args = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return ModelResponse(tool_calls=(ToolCall(call_id, name, args),))


# -- through the Hub with the scripted model ---------------------------------------------------


def test_scripted_tool_call_result_and_reply(store: Store) -> None:
    model = ScriptedModel(steps=[calls_to("add_task", {"title": "buy milk", "due": "friday"}), "Added buy milk for Friday."])
    hub = make_hub(store, model)

    reply = ask(hub, "add buy milk to my todo list, due friday")

    assert reply.text == "Added buy milk for Friday." and reply.agent == "tasks" and reply.kind == "agent"
    # only its own tools: nothing here reaches back, so search_memory is not offered
    assert [t["function"]["name"] for t in model.calls[0].tools] == TASK_TOOLS
    seen = model.calls[1].messages
    assert seen[-2]["tool_calls"][0]["function"]["name"] == "add_task"
    assert seen[-1] == {"role": "tool", "tool_call_id": "call_1", "content": "Added #1 buy milk (due Fri 2024-05-03)"}
    assert [t.title for t in memory.list_tasks(store, "user:1")] == ["buy milk"]
    user, answer = store.messages("user:1")
    assert (user.role, user.agent) == ("user", "tasks")
    assert (answer.role, answer.agent, answer.text, answer.reply_to) == ("agent", "tasks", reply.text, user.id)
    (record,) = store.calls("user:1")
    assert record["agent"] == "tasks" and record["ok"] == 1 and record["message_id"] == user.id
    assert [c["name"] for c in json.loads(record["extra"])["tool_calls"]] == ["add_task"]


def test_tool_errors_become_text_for_the_model(store: Store) -> None:
    model = ScriptedModel(
        steps=[
            calls_to("complete_task", {"id": "the milk one"}, "c1"),
            calls_to("add_task", {"title": "x", "due": "whenever"}, "c2"),
            calls_to("no_such_tool", {}, "c3"),
            calls_to("list_tasks", "{not json", "c4"),
            "Sorry, I could not do that.",
        ]
    )
    reply = ask(make_hub(store, model), "/tasks tick off the milk")

    assert reply.text == "Sorry, I could not do that." and reply.kind == "agent"
    results = {m["tool_call_id"]: m["content"] for m in model.calls[-1].messages if m["role"] == "tool"}
    assert results["c1"].startswith("error: bad arguments for complete_task: id: Input should be a valid integer")
    assert results["c2"].startswith("error: add_task failed: cannot read due date 'whenever'")
    assert results["c3"].startswith("error: unknown tool 'no_such_tool'; available: add_task, complete_task")
    assert results["c4"].startswith("error: arguments of list_tasks are not a JSON object")
    assert memory.list_tasks(store, "user:1") == []
    assert store.messages("user:1")[-1].text == "Sorry, I could not do that."


def test_step_limit_ends_with_a_clear_reply(store: Store) -> None:
    model = ScriptedModel(default=calls_to("list_tasks", {}))  # never stops asking for tools
    reply = ask(make_hub(store, model, max_tool_steps=2), "/tasks what's due")

    assert reply.text == STEP_LIMIT_REPLY
    assert len(model.calls) == 3  # two tool rounds, then one call told to answer
    assert model.calls[-1].messages[-1] == {"role": "user", "content": FINAL_STEP_NOTE}
    assert model.calls[-1].tools  # still offered: some providers reject tool history without tools
    assert store.messages("user:1")[-1].text == STEP_LIMIT_REPLY
    assert store.calls("user:1")[0]["ok"] == 1


def test_provider_error_gives_a_clear_reply_and_keeps_the_message(store: Store) -> None:
    model = ScriptedModel(steps=[ModelUnavailable("rate limited after 3 attempts")])
    reply = ask(make_hub(store, model), "remind me to water the plants at 18:00")

    assert reply.kind == "error" and reply.text == MODEL_DOWN_REPLY
    (kept,) = store.messages("user:1")  # the person's message, no reply
    assert kept.text == "remind me to water the plants at 18:00" and kept.agent == "reminders"
    assert store.calls("user:1")[0]["ok"] == 0


# -- through the real litellm client against the loopback fake ------------------------------


@pytest.fixture
def fake_llm() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as server:
        yield server


def test_litellm_tool_loop_end_to_end(store: Store, fake_llm: FakeOpenAI) -> None:
    fake_llm.script(tool_call("add_task", {"title": "pay rent", "due": "tomorrow"}, call_id="call_rent"), text("Done: pay rent, due tomorrow."))
    model = LiteLLMModel("openai/fake", api_base=fake_llm.base_url, retries=0)
    reply = ask(make_hub(store, model), "/tasks add pay rent due tomorrow")

    assert reply.text == "Done: pay rent, due tomorrow."
    first, second = fake_llm.requests
    assert [t["function"]["name"] for t in first["tools"]] == TASK_TOOLS
    assert first["messages"][-1] == {"role": "user", "content": "add pay rent due tomorrow"}
    tool_message = second["messages"][-1]
    assert tool_message["role"] == "tool" and tool_message["tool_call_id"] == "call_rent"
    assert tool_message["content"] == "Added #1 pay rent (due Thu 2024-05-02)"
    assert memory.list_tasks(store, "user:1")[0].due == "2024-05-02"
    record = store.calls("user:1")[0]
    assert record["ok"] == 1 and record["prompt_tokens"] > 0


def test_provider_500s_through_litellm_give_the_model_down_reply(store: Store, fake_llm: FakeOpenAI) -> None:
    fake_llm.script(error(500), error(500), text("too late"))
    model = LiteLLMModel("openai/fake", api_base=fake_llm.base_url, retries=1, backoff=0.01)
    reply = ask(make_hub(store, model), "/notes save: gate code 4711")

    assert reply.kind == "error" and reply.text == MODEL_DOWN_REPLY
    assert len(fake_llm.requests) == 2  # one try and one retry, then the person hears back
    (kept,) = store.messages("user:1")
    assert kept.text == "/notes save: gate code 4711"
    assert memory.list_vault_items(store, "user:1") == []


# -- run_agent on its own -----------------------------------------------------------------------


class EchoArgs(BaseModel):
    size: int = 10


@tool
def big(ctx: ToolContext, args: EchoArgs) -> str:
    """Return a long text."""
    return "x" * args.size


@tool
def boom(ctx: ToolContext, args: EchoArgs) -> str:
    """Always fails."""
    raise RuntimeError("disk on fire")


def run(model: ScriptedModel, store: Store, max_steps: int = 5):
    messages = [{"role": "system", "content": "test"}, {"role": "user", "content": "go"}]
    return asyncio.run(run_agent(messages, [big, boom], model, make_ctx(store), max_steps=max_steps))


def test_tool_results_are_bounded(store: Store) -> None:
    model = ScriptedModel(steps=[calls_to("big", {"size": 50_000}), "ok"])
    result = run(model, store)
    content = model.calls[1].messages[-1]["content"]
    assert len(content) <= TOOL_RESULT_CHARS + 20 and content.endswith("[truncated]")
    assert result.text == "ok" and result.steps == 2


def test_too_many_calls_in_one_step_are_answered_not_run(store: Store) -> None:
    calls = tuple(ToolCall(f"c{i}", "big", '{"size": 3}') for i in range(MAX_CALLS_PER_STEP + 2))
    model = ScriptedModel(steps=[ModelResponse(tool_calls=calls), "ok"])
    result = run(model, store)
    answers = [m for m in model.calls[1].messages if m["role"] == "tool"]
    assert len(answers) == MAX_CALLS_PER_STEP + 2  # every call id gets an answer
    assert [a["content"] for a in answers[:MAX_CALLS_PER_STEP]] == ["xxx"] * MAX_CALLS_PER_STEP
    assert all(a["content"].startswith("error: at most") for a in answers[MAX_CALLS_PER_STEP:])
    assert [c["ok"] for c in result.tool_calls].count(True) == MAX_CALLS_PER_STEP


def test_exception_text_reaches_the_model_and_the_loop_goes_on(store: Store) -> None:
    model = ScriptedModel(steps=[calls_to("boom", {}), "It failed: disk on fire."])
    result = run(model, store)
    assert model.calls[1].messages[-1]["content"] == "error: boom failed: disk on fire"
    assert result.text == "It failed: disk on fire." and result.tool_calls[0]["ok"] is False


def test_final_step_text_is_kept_when_the_model_also_asks_for_tools(store: Store) -> None:
    stubborn = ModelResponse(content="Here is what I have so far.", tool_calls=(ToolCall("c", "big", "{}"),))
    model = ScriptedModel(default=stubborn)
    result = run(model, store, max_steps=1)
    assert result.text == "Here is what I have so far." and result.hit_step_limit
    assert len(model.calls) == 2


def test_each_model_request_is_a_round_with_its_tokens_and_its_tool_calls(store: Store) -> None:
    """The console's tool loop: one round per request, its provider tokens, and which round asked for each call."""
    first = ModelResponse(
        tool_calls=(ToolCall("a", "big", '{"size": 2}'), ToolCall("b", "boom", "{}")), prompt_tokens=120, completion_tokens=9
    )
    second = ModelResponse(tool_calls=(ToolCall("c", "big", '{"size": 1}'),), prompt_tokens=150, completion_tokens=7)
    model = ScriptedModel(steps=[first, second, ModelResponse(content="done", prompt_tokens=170, completion_tokens=3)])
    result = run(model, store)
    assert [(r["prompt_tokens"], r["completion_tokens"], r["tool_calls"]) for r in result.rounds] == [(120, 9, 2), (150, 7, 1), (170, 3, 0)]
    assert all(r["latency_ms"] >= 0 for r in result.rounds)
    assert [(c["name"], c["round"], c["ok"], c["result"]) for c in result.tool_calls] == [
        ("big", 0, True, "xx"),
        ("boom", 0, False, "error: boom failed: disk on fire"),
        ("big", 1, True, "x"),
    ]
