"""Quiet logs: one line per failure with its reason, tracebacks only at DEBUG, no stray warnings."""

from __future__ import annotations

import asyncio
import gc
import io
import logging
import warnings
from pathlib import Path

from pydantic import BaseModel

from scopehub.agents import tool
from scopehub.hub.models import LiteLLMModel
from scopehub.hub.runtime import run_tool
from scopehub.hub.transports.telegram.logs import OneLineFormatter, quiet_library_logs
from scopehub.memory import Store
from tests.agents.helpers import make_ctx
from tests.fakes.openai_server import FakeOpenAI, delay, text


def formatted(level: str) -> str:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(OneLineFormatter(tracebacks=level == "DEBUG"))
    logger = logging.getLogger("tests.quiet")
    logger.addHandler(handler)
    try:
        try:
            try:
                raise ConnectionError("database went away")
            except ConnectionError as inner:
                raise RuntimeError("could not store the message") from inner
        except RuntimeError:
            logger.exception("update 7 not stored")
    finally:
        logger.removeHandler(handler)
    return stream.getvalue()


def test_a_failure_is_one_line_with_its_reason_and_the_traceback_only_at_debug() -> None:
    line = formatted("INFO")
    assert line.count("\n") == 1 and "Traceback" not in line
    assert line.rstrip().endswith(
        "update 7 not stored (RuntimeError: could not store the message; caused by ConnectionError: database went away)"
    )
    assert "Traceback (most recent call last)" in formatted("DEBUG")


class _Args(BaseModel):
    title: str


@tool
def broken(ctx, args: _Args) -> str:
    """A tool that fails."""
    raise ValueError("the task list is locked")


def test_a_failed_tool_call_is_one_warning_line_and_its_traceback_is_debug(tmp_path: Path, caplog) -> None:
    with Store(tmp_path / "hub.db") as store, caplog.at_level(logging.DEBUG, logger="scopehub.hub.runtime"):
        result, ok = asyncio.run(run_tool({"broken": broken}, "broken", '{"title": "x"}', make_ctx(store, "user:1")))
    assert not ok and "the task list is locked" in result
    (warning,) = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert warning.getMessage() == "tool broken failed: ValueError: the task list is locked" and warning.exc_info is None
    assert [r.exc_info is not None for r in caplog.records if r.levelno == logging.DEBUG] == [True]


def test_a_cancelled_model_call_leaves_no_never_awaited_warning() -> None:
    async def main() -> None:
        with FakeOpenAI(default=lambda request: delay(0.2, text("hi"))) as llm:
            model = LiteLLMModel("openai/fake", api_base=llm.base_url, api_key="sk-fake")
            model.warm_up()
            for attempt in range(8):  # cancelled at different points of litellm's worker-thread phase
                call = asyncio.create_task(model.complete([{"role": "user", "content": "hi"}]))
                await asyncio.sleep(0.002 * attempt)
                call.cancel()
                await asyncio.gather(call, return_exceptions=True)
            await asyncio.sleep(0.3)

    with warnings.catch_warnings(record=True) as caught:
        asyncio.run(main())
        gc.collect()
    assert [str(w.message) for w in caught if "never awaited" in str(w.message)] == []


def test_litellm_lines_never_go_to_stdout(capsys) -> None:
    import litellm  # noqa: F401  (adds litellm's own stdout handler)

    quiet_library_logs()
    logging.getLogger("LiteLLM").info("LiteLLM completion() model= gpt-4o-mini; provider = openai")
    logging.getLogger("LiteLLM").warning("a warning goes to the root handler, on stderr")
    assert capsys.readouterr().out == ""
    assert logging.getLogger("LiteLLM").handlers == [] and logging.getLogger("httpx").level == logging.WARNING
