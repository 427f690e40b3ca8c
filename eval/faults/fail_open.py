"""Fail-open memory: search, the facts block and fact extraction raising."""

from __future__ import annotations

import asyncio
import logging
import sqlite3
from pathlib import Path
from typing import Any

from scopehub.hub.facts import (
    BLOCK_HEADER,
)
from scopehub.hub.models import (
    ModelResponse,
    ToolCall,
)
from scopehub.hub.models.testing import FunctionModel, ScriptedModel
from scopehub.hub.orchestrator import (
    Inbound,
    Reply,
)
from scopehub.memory import (
    Message,
    Store,
)

from ._harness import (
    LogRecords,
    capture_logs,
    echo_model,
    is_extraction,
    last_user_text,
    make_hub,
)
from ._outcome import (
    FAILURES_ANSWERED,
    Outcome,
    Scenario,
    timed,
)

log = logging.getLogger(__name__)



class _BrokenFacts:
    """A facts service whose every part fails."""

    def block(self, scope: str, tokenizer: Any, budget: int) -> str:
        raise RuntimeError("facts table unreadable")

    async def after_reply(self, scope: str, message: Message) -> None:
        raise RuntimeError("extractor exploded")


def _search_then_answer() -> ScriptedModel:
    """Asks for search_memory, then answers with what the tool returned."""

    def answer(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> str:
        results = [m["content"] for m in messages if m.get("role") == "tool"]
        return "answered; search said: " + (results[-1][:80] if results else "nothing")

    call = ModelResponse(tool_calls=(ToolCall(id="call_1", name="search_memory", arguments='{"query": "milk"}'),))
    return ScriptedModel([call, answer])


def fail_open(workdir: Path, *, seed: int = 0) -> Outcome:
    """Search, the facts block or fact extraction failing: the agent still answers, and the failure is logged."""
    out = Outcome("fail_open", verified={FAILURES_ANSWERED: 0})
    with timed(out):
        workdir.mkdir(parents=True, exist_ok=True)
        with Store(workdir / "fail_open.db") as store:

            def broken_search(*args: Any, **kwargs: Any) -> list[Any]:
                raise sqlite3.OperationalError("disk I/O error")

            def judge(
                case: str, reply: Reply | None, logs: LogRecords, logged: str, *, kind: str = "agent", text: str = "", problem: str = ""
            ) -> None:
                before = out.failures
                if problem:
                    out.fail("crashed", f"{case}: {problem}")
                if reply is None or reply.kind != kind or (text and text not in reply.text):
                    out.fail("crashed", f"{case}: no usable answer ({getattr(reply, 'text', None)!r})")
                elif reply.message_id is None or store.get(reply.scope, reply.message_id) is None:
                    out.fail("lost", f"{case}: the person's message is not stored")
                if logged not in logs.text():
                    out.fail("crashed", f"{case}: the failure was not logged (expected {logged!r})")
                if out.failures == before:
                    out.verify(FAILURES_ANSWERED)

            # 1. search raises: the tool result says so, the agent answers without it.
            model = _search_then_answer()
            hub = make_hub(store, model)
            store.search = broken_search  # type: ignore[method-assign]
            try:
                with capture_logs() as logs:
                    reply = asyncio.run(hub.handle(Inbound(scope="user:71", text="what did I say about milk?")))
                judge("search raising", reply, logs, "tool search_memory failed", text="search_memory failed")
                # /search itself fails open too.
                with capture_logs() as logs:
                    reply = asyncio.run(hub.handle(Inbound(scope="user:71", text="/search milk")))
                judge("/search raising", reply, logs, "command /search failed", kind="command", text="nothing was lost")
            finally:
                del store.search  # back to the class method
            # 2. the facts block raises: answered without facts.
            model2 = echo_model()
            hub = make_hub(store, model2, facts=_BrokenFacts())
            with capture_logs() as logs:
                reply = asyncio.run(hub.handle(Inbound(scope="user:72", text="add buy milk to my tasks")))
            sent_block = bool(model2.calls) and BLOCK_HEADER in model2.calls[-1].messages[0]["content"]
            judge("facts block raising", reply, logs, "facts unavailable", text="re: ", problem="a facts block was still sent" if sent_block else "")
            # 3. the facts service's after_reply raises: after_send swallows and logs it.
            with capture_logs() as logs:
                raised = ""
                try:
                    asyncio.run(hub.after_send(reply))
                except Exception as exc:
                    raised = f"after_send raised {type(exc).__name__}: {exc}"
            judge("after_reply raising", reply, logs, "fact extraction failed", problem=raised)
            # 4. the extraction model raises inside the real FactKeeper.
            async def exploding(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> str:
                if is_extraction(messages):
                    raise RuntimeError("extraction model down")
                return "re: " + last_user_text(messages)

            hub = make_hub(store, FunctionModel(exploding), facts=True)
            with capture_logs() as logs:

                async def talk() -> Reply | None:
                    answer = await hub.handle(Inbound(scope="user:73", text="my email is ann@example.com"))
                    await hub.after_send(answer)
                    return answer

                reply = asyncio.run(talk())
            judge("extraction model raising", reply, logs, "fact extraction failed", text="re: ")
            out.note(f"{out.verified[FAILURES_ANSWERED]} failure cases answered and logged" if out.ok else "see the failures above")
    return out




SCENARIOS = {"fail_open": Scenario(fail_open)}
