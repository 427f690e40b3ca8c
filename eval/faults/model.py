"""Model faults: timeouts, 429s, 500s, malformed bodies, bad tool calls, a junk LLM router."""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from scopehub.hub.models import (
    LiteLLMModel,
)
from scopehub.hub.orchestrator import (
    MODEL_DOWN_REPLY,
    MODEL_FAILED_REPLY,
    NO_ANSWER_REPLY,
    Inbound,
    Reply,
)
from scopehub.hub.runtime import STEP_LIMIT_REPLY
from scopehub.memory import (
    Store,
)

from ._harness import (
    agent_registry,
    fake_openai,
    hub_settings,
    make_hub,
    quiet_litellm,
)
from ._outcome import (
    FAULTS_ANSWERED,
    Outcome,
    Scenario,
    timed,
)

log = logging.getLogger(__name__)


MODEL_TIMEOUT = 0.3  # seconds per model request in the scenario
MODEL_RETRIES = 1
MAX_BACKOFF = 1.0
ROUTER_TIMEOUT = 0.5
MAX_STEPS = 3
HANG_GRACE = 1.0  # this long past its bound a case is cancelled (and counted as hung)


@dataclass(frozen=True)
class FaultCase:
    """One model fault: the fake server's answers to the agent's (and the router's) requests, and the reply due."""

    name: str
    agent: tuple[Any, ...]  # FakeOpenAI steps for the agent's requests, in order
    expect: str  # the reply the person must get
    router: tuple[Any, ...] | None = None  # steps for the LLM router's requests; None: no LLM router
    bound: float = 0.0  # seconds the reply must come within (0: the retry policy's worst case)
    min_seconds: float = 0.0  # e.g. a Retry-After that must be honoured
    agent_requests: int | None = None  # how many requests the agent's model must get
    tool_error: bool = False  # a tool result starting with "error:" must reach the model
    via: str | None = None  # the route the hub must keep (the local one when the LLM router fails)
    text: str = "add buy milk to my tasks"


def _worst_case() -> float:
    """The retry policy's bound for one agent call, plus the router and some slack for a loaded machine."""
    attempts = MODEL_RETRIES + 1
    return attempts * MODEL_TIMEOUT + MODEL_RETRIES * MAX_BACKOFF + ROUTER_TIMEOUT + 2.0


def fault_cases() -> list[FaultCase]:
    """The model faults the scenario plays (steps from ``tests/fakes/openai_server.py``)."""
    f = fake_openai()
    completion_without_text = f.raw(
        {
            "id": "chatcmpl-null",
            "object": "chat.completion",
            "created": 0,
            "model": "fake",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": None}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 0, "total_tokens": 1},
        }
    )
    junk_router = f.text("I'd say tasks!! {not json")
    return [
        FaultCase("timeout", (f.delay(3), f.delay(3)), MODEL_DOWN_REPLY, agent_requests=MODEL_RETRIES + 1),
        FaultCase("timeout_then_ok", (f.delay(3), f.text("recovered")), "recovered"),
        FaultCase(
            "rate_limit_retry_after",
            (f.error(429, headers={"Retry-After": "1"}), f.text("recovered")),
            "recovered",
            min_seconds=1.0,
        ),
        FaultCase("rate_limit_persistent", (f.error(429, headers={"Retry-After": "1"}),) * 2, MODEL_DOWN_REPLY, min_seconds=1.0),
        FaultCase("retry_after_huge", (f.error(429, headers={"Retry-After": "86400"}), f.text("recovered")), "recovered"),
        FaultCase("retry_after_http_date", (f.error(429, headers={"Retry-After": "Wed, 21 Oct 2015 07:28:00 GMT"}), f.text("recovered")), "recovered"),
        FaultCase("retry_after_negative", (f.error(429, headers={"Retry-After": "-5"}), f.text("recovered")), "recovered"),
        # One retry after at most MAX_BACKOFF: a small bound, so a hang costs little.
        FaultCase("retry_after_nan", (f.error(429, headers={"Retry-After": "nan"}), f.text("recovered")), "recovered", bound=3.0),
        FaultCase("server_error_then_ok", (f.error(500), f.text("recovered")), "recovered"),
        FaultCase("server_errors", (f.error(500), f.error(503)), MODEL_DOWN_REPLY, agent_requests=2),
        FaultCase("bad_request", (f.error(400),), MODEL_FAILED_REPLY, agent_requests=1),
        FaultCase("malformed_body", (f.malformed("<html>502 Bad Gateway</html>", content_type="text/html"), f.malformed('{"foo": 1}')), MODEL_DOWN_REPLY),
        FaultCase("malformed_then_ok", (f.malformed("not json at all"), f.text("recovered")), "recovered"),
        FaultCase("no_choices", (f.raw({"id": "x", "object": "chat.completion", "choices": []}),) * 2, MODEL_DOWN_REPLY),
        FaultCase("null_content", (completion_without_text,), NO_ANSWER_REPLY),
        FaultCase("router_junk", (f.text("fine"),), "fine", router=(junk_router,), via="local"),
        FaultCase("router_unknown_agent", (f.text("fine"),), "fine", router=(f.text('{"agent": "root", "also_sees": ["*"]}'),), via="local"),
        FaultCase("router_timeout", (f.text("fine"),), "fine", router=(f.delay(3, f.text('{"agent": "tasks"}')),), via="local"),
        FaultCase("router_server_error", (f.text("fine"),), "fine", router=(f.error(500),), via="local"),
        FaultCase("router_malformed_body", (f.text("fine"),), "fine", router=(f.malformed("<html>"),), via="local"),
        FaultCase("tool_bad_json", (f.tool_call("search_memory", "{not json"), f.text("done")), "done", tool_error=True),
        FaultCase("tool_bad_types", (f.tool_call("add_task", {"title": ["x"], "due": 5}), f.text("done")), "done", tool_error=True),
        FaultCase("tool_missing_arguments", (f.tool_call("complete_task", {}), f.text("done")), "done", tool_error=True),
        FaultCase("tool_unknown", (f.tool_call("format_disk", {"really": True}), f.text("done")), "done", tool_error=True),
        FaultCase("tool_not_this_agents", (f.tool_call("save_note", {"text": "x"}), f.text("done")), "done", tool_error=True),
        FaultCase(
            "tool_many_calls",
            (f.tool_calls([("search_memory", {"query": f"q{i}"}) for i in range(12)]), f.text("done")),
            "done",
            tool_error=True,
        ),
        FaultCase(
            "tool_loop",
            (f.tool_call("search_memory", {"query": "again"}),) * (MAX_STEPS + 1),
            STEP_LIMIT_REPLY,
            agent_requests=MAX_STEPS + 1,
        ),
        FaultCase("tool_then_down", (f.tool_call("search_memory", {"query": "x"}), f.error(500), f.error(500)), MODEL_DOWN_REPLY),
    ]


async def _play_fault(case: FaultCase, index: int, server: Any, store: Store, text_step: Callable[[str], Any]) -> dict[str, Any]:
    agent_steps = deque(case.agent)
    router_steps = deque(case.router or ())
    extra: list[str] = []

    def respond(body: dict[str, Any]) -> Any:
        queue = router_steps if "response_format" in body else agent_steps  # the router asks for JSON
        if queue:
            return queue.popleft()
        extra.append("router" if "response_format" in body else "agent")
        return text_step("unexpected extra request")

    server.reset()
    server.default = respond
    model = LiteLLMModel("openai/fake-agent", api_base=server.base_url, timeout=MODEL_TIMEOUT, retries=MODEL_RETRIES, backoff=0.05, max_backoff=MAX_BACKOFF)
    if case.router is not None:
        # As deployed: HUB_ROUTER_MODEL and HUB_API_BASE set, the router built by the composition root.
        from scopehub.hub.app import build_hub

        settings = hub_settings(router_model="openai/fake-router", api_base=server.base_url, router_timeout=ROUTER_TIMEOUT, max_tool_steps=MAX_STEPS)
        hub = build_hub(settings, store=store, model=model, registry=agent_registry())
        if hub.deps.router_model is None:
            raise AssertionError("HUB_ROUTER_MODEL set but no router model built")
    else:
        hub = make_hub(store, model, max_tool_steps=MAX_STEPS, router_timeout=ROUTER_TIMEOUT)
    scope, ext_id = f"user:{5000 + index}", f"fault-{index}"
    bound = case.bound or _worst_case()
    reply: Reply | None = None
    error = None
    started = time.perf_counter()
    try:
        reply = await asyncio.wait_for(hub.handle(Inbound(scope=scope, text=case.text, ext_id=ext_id)), bound + HANG_GRACE)
    except TimeoutError:
        error = f"no reply within {bound + HANG_GRACE:.1f} s (cancelled)"
    except Exception as exc:
        error = f"{type(exc).__name__}: {exc}"
    seconds = time.perf_counter() - started
    stored = store.find_ext(scope, ext_id)
    agent_bodies = [body for body in server.requests if "response_format" not in body]
    return {
        "case": case,
        "reply": reply,
        "error": error,
        "seconds": seconds,
        "bound": bound,
        "stored": stored is not None and stored.text == case.text,
        "reply_stored": _reply_stored(store, reply),
        "agent_requests": len(agent_bodies),
        "tool_results": [m.get("content", "") for body in agent_bodies for m in body.get("messages", []) if m.get("role") == "tool"],
        "extra": extra,
    }


def _reply_stored(store: Store, reply: Reply | None) -> bool:
    """An agent's answer is stored as the reply (an error reply is not an answer and is not stored)."""
    if reply is None or reply.kind != "agent":
        return True
    stored = store.get(reply.scope, reply.reply_id) if reply.reply_id is not None else None
    return stored is not None and stored.text == reply.text


def behaviour_problems(result: dict[str, Any]) -> list[str]:
    """What is wrong with what the person got (the reply, the requests made), timing aside."""
    case: FaultCase = result["case"]
    reply: Reply | None = result["reply"]
    problems = []
    if result["error"]:
        problems.append(result["error"])
    elif reply is None:
        problems.append("no reply")
    else:
        if reply.text != case.expect:
            problems.append(f"reply {reply.text[:80]!r}, expected {case.expect[:60]!r}")
        if case.via and reply.via != case.via:
            problems.append(f"routed via {reply.via!r}, expected {case.via!r}")
    if case.agent_requests is not None and result["agent_requests"] != case.agent_requests:
        problems.append(f"{result['agent_requests']} model requests, expected {case.agent_requests}")
    if case.tool_error and not any(str(text).startswith("error:") for text in result["tool_results"]):
        problems.append("no tool error reached the model")
    return problems


def _judge_fault(result: dict[str, Any], out: Outcome) -> bool:
    case: FaultCase = result["case"]
    problems = behaviour_problems(result)
    # The bounds are the scenario's measurement (the command reports them); tests assert behaviour only.
    if result["seconds"] > result["bound"]:
        problems.append(f"took {result['seconds']:.2f} s, bound {result['bound']:.2f} s")
    if result["seconds"] < case.min_seconds:
        problems.append(f"took {result['seconds']:.2f} s: Retry-After of {case.min_seconds:.0f} s not honoured")
    if problems:  # one failing case counts once, with every problem named
        out.fail("crashed", f"{case.name}: " + "; ".join(problems))
    if not result["stored"]:
        out.fail("lost", f"{case.name}: the person's message is not stored")
    if not result["reply_stored"]:
        out.fail("lost", f"{case.name}: the reply is not stored")
    return not problems and result["stored"] and result["reply_stored"]


def model_faults(workdir: Path, *, cases: Sequence[str] | None = None, seed: int = 0) -> Outcome:
    """Model faults through the loopback OpenAI fake and the real litellm client: a clear reply in bounded time."""
    out = Outcome("model_faults", verified={FAULTS_ANSWERED: 0})
    with timed(out):
        workdir.mkdir(parents=True, exist_ok=True)
        fakes = fake_openai()
        selected = [case for case in fault_cases() if cases is None or case.name in cases]
        with Store(workdir / "model_faults.db") as store, fakes.FakeOpenAI() as server, quiet_litellm():

            # One event loop per case: a fault that corrupts the loop (a NaN timer) must not
            # spill into the cases after it.
            results = [asyncio.run(_play_fault(case, index, server, store, fakes.text)) for index, case in enumerate(selected)]
        slowest = max(results, key=lambda r: r["seconds"]) if results else None
        for result in results:
            ok = _judge_fault(result, out)
            out.details[result["case"].name] = {**result, "ok": ok}
            if ok:
                out.verify(FAULTS_ANSWERED)
        if slowest is not None:
            out.note(
                f"{len(results)} cases; slowest {slowest['case'].name} {slowest['seconds']:.2f} s; "
                f"bound {_worst_case():.1f} s (timeout {MODEL_TIMEOUT} s x {MODEL_RETRIES + 1} attempts, backoff <= {MAX_BACKOFF} s, router {ROUTER_TIMEOUT} s)"
            )
        out.note("times: " + ", ".join(f"{r['case'].name} {r['seconds']:.2f}s" for r in results))
    return out




SCENARIOS = {"model_faults": Scenario(model_faults)}
