"""``openai/<name>`` with an ``api_base`` goes straight to the server (hub/models/openai_compat.py):
the server receives exactly what litellm sent it, the hub reads back exactly what litellm
gave, failures are retried or refused as before, and litellm is never imported for it."""

from __future__ import annotations

import asyncio
import subprocess

import pytest

from scopehub.hub.errors import ModelError, ModelUnavailable
from scopehub.hub.models import LiteLLMModel
from tests.fakes.openai_server import FakeOpenAI, delay, error, malformed, raw, text, tool_call
from tests.helpers import checkout_env, checkout_python

MESSAGES = [
    {"role": "system", "content": "You are the tasks agent.", "cache_control": {"type": "ephemeral"}},
    {"role": "system", "content": "Facts: the person is Dana."},
    {"role": "user", "content": "add pay rent, ünïcode 🎉"},
    {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "add_task", "arguments": '{"title": "rent"}'}}]},
    {"role": "tool", "tool_call_id": "c1", "content": "Added #1"},
    {"role": "assistant", "content": "", "name": "tasks"},
    {"role": "user", "content": [{"type": "text", "text": "and the gas bill"}]},
]
TOOLS = [{"type": "function", "function": {"name": "add_task", "description": "add", "parameters": {"type": "object", "properties": {"title": {"type": "string"}}}}}]


def completion(message: dict, usage: dict | None, model: str | None = "served-name") -> dict:
    body = {"id": "x", "object": "chat.completion", "created": 1, "choices": [{"index": 0, "message": message, "finish_reason": "stop"}]}
    if model is not None:
        body["model"] = model
    if usage is not None:
        body["usage"] = usage
    return body


ANSWERS = [
    text("plain answer"),
    tool_call("add_task", {"title": "gas"}),
    raw(completion({"role": "assistant", "content": "hi"}, None)),  # no usage: litellm counts 0
    raw(completion({"role": "assistant", "content": "hi"}, {"prompt_tokens": 5, "completion_tokens": 1}, model=None)),
    raw(completion({"role": "assistant", "content": None, "tool_calls": [{"id": "k", "type": "function", "function": {"name": "f", "arguments": {"a": 1}}}]}, {"prompt_tokens": 5.0, "completion_tokens": 1})),
    raw(completion({"role": "assistant", "content": "cached"}, {"prompt_tokens": 50, "completion_tokens": 1, "prompt_tokens_details": {"cached_tokens": 30}})),
    raw(completion({"role": "assistant", "content": "written"}, {"prompt_tokens": 50, "completion_tokens": 1, "cache_read_input_tokens": 20, "cache_creation_input_tokens": 10})),
    raw(completion({"role": "assistant", "content": "no details"}, {"prompt_tokens": 50, "completion_tokens": 1, "prompt_tokens_details": None})),
]


def run_both(model_name: str, calls, cache_marks: str = "auto"):
    """What the server received and what the hub read, through litellm and directly."""
    seen = {}
    for direct in (False, True):
        with FakeOpenAI() as llm:
            model = LiteLLMModel(model_name, api_base=llm.base_url, api_key="k", retries=0, direct=direct, cache_marks=cache_marks)
            answers = []
            for answer, kwargs in calls:
                llm.script(answer)
                answers.append(asyncio.run(model.complete(MESSAGES, **kwargs)))
            seen[direct] = (llm.requests, answers)
    return seen[False], seen[True]


@pytest.mark.parametrize("model_name, marks", [("openai/fake", "auto"), ("openai/gpt-4o-mini", "auto"), ("openai/claude-3-5-sonnet", "on")])
def test_the_server_gets_what_litellm_sent_and_the_hub_reads_what_litellm_gave(model_name, marks):
    calls = [(answer, {"tools": TOOLS}) for answer in ANSWERS] + [(text('{"facts": []}'), {"json_mode": True, "model": "openai/other"})]
    (sent_by_litellm, read_by_litellm), (sent_directly, read_directly) = run_both(model_name, calls, marks)
    assert sent_directly == sent_by_litellm
    # A tool call the server gave no id gets a fresh one either way: compare the rest.
    assert read_directly == read_by_litellm


@pytest.mark.parametrize(
    "steps, retries, raised, requests",
    [
        ([error(400, {"error": {"message": "bad field"}})], 2, ModelError, 1),  # refused: not tried again
        ([error(500), error(500)], 1, ModelUnavailable, 2),
        ([malformed("not json at all")], 0, ModelUnavailable, 1),  # 200 that is not JSON
        ([raw({"foo": 1})], 0, ModelUnavailable, 1),  # JSON that is no completion
        ([delay(2.0, text("late"))], 0, ModelUnavailable, 1),  # longer than the timeout
    ],
)
def test_failures_are_retried_or_refused_as_through_litellm(steps, retries, raised, requests):
    with FakeOpenAI() as llm:
        llm.script(*steps)
        model = LiteLLMModel("openai/fake", api_base=llm.base_url, retries=retries, backoff=0.01, timeout=0.5)
        with pytest.raises(raised):
            asyncio.run(model.complete([{"role": "user", "content": "hi"}]))
        assert len(llm.requests) == requests


def test_a_rate_limit_is_waited_out_then_answered():
    with FakeOpenAI() as llm:
        llm.script(error(429, headers={"Retry-After": "0.05"}), text("after the pause"))
        model = LiteLLMModel("openai/fake", api_base=llm.base_url, retries=2, backoff=5.0)
        assert asyncio.run(model.complete([{"role": "user", "content": "hi"}])).content == "after the pause"
        assert len(llm.requests) == 2


def test_an_unreachable_server_is_the_model_unavailable():
    from scopehub.eval.workers import _free_port

    model = LiteLLMModel("openai/fake", api_base=f"http://127.0.0.1:{_free_port()}/v1", retries=1, backoff=0.01)
    with pytest.raises(ModelUnavailable, match="after 2 attempts"):
        asyncio.run(model.complete([{"role": "user", "content": "hi"}]))


def test_litellm_is_never_imported_for_an_openai_compatible_server(tmp_path):
    with FakeOpenAI() as llm:
        code = f"""
import asyncio, sys
from scopehub.hub.models import LiteLLMModel, price_call
model = LiteLLMModel("openai/fake", api_base={llm.base_url!r})
model.warm_up()
answer = asyncio.run(model.complete([{{"role": "user", "content": "hi"}}]))
async def shown(text): pass
streamed = asyncio.run(model.stream([{{"role": "user", "content": "hi"}}], on_text=shown))
assert streamed.content == "ok", streamed
price_call("fake", 10, 2)  # an unpriced model: remembered on disk by the first process
print(answer.content, "litellm" in sys.modules)
"""
        env = checkout_env(tmp_path, {"PATH": "/usr/bin:/bin", "HUB_PRICE_CACHE": str(tmp_path / "prices.json"), "HUB_TEST_GUARD": "1"})
        first = subprocess.run(checkout_python(code), capture_output=True, text=True, env=env, timeout=120)
        second = subprocess.run(checkout_python(code), capture_output=True, text=True, env=env, timeout=120)
    assert first.returncode == 0, first.stderr
    assert first.stdout.split() == ["ok", "True"]  # the first process asked litellm's cost map once
    assert second.returncode == 0, second.stderr
    assert second.stdout.split() == ["ok", "False"]  # later ones never import it
    assert "fake" in (tmp_path / "prices.json").read_text()

