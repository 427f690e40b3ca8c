"""Chat commands and the hub's answers as a person sees them: unknown commands, /search,
counts in words, the reply deadline, and who is asking in a group."""

from __future__ import annotations

import asyncio

from scopehub.hub import Deps, Hub, Inbound, load_settings
from scopehub.hub.commands import format_usage
from scopehub.hub.models.testing import FunctionModel, ScriptedModel
from scopehub.hub.orchestrator import MODEL_SLOW_REPLY
from scopehub.memory import Store, Usage
from tests.helpers import registry_of


def make_hub(tmp_path, model=None, **settings) -> Hub:
    return Hub(Deps(store=Store(tmp_path / "hub.db"), settings=load_settings(**settings), model=model), registry_of())


def ask(hub: Hub, text: str, scope: str = "user:1", **kw):
    return asyncio.run(hub.handle(Inbound(scope=scope, text=text, **kw)))


def test_an_unknown_command_says_so_and_reaches_no_agent(tmp_path):
    model = ScriptedModel(default="ok")
    hub = make_hub(tmp_path, model)
    assert ask(hub, "add buy milk to my tasks").agent == "tasks"  # a previous agent to stick to
    reply = ask(hub, "/bogus hello")
    assert (reply.kind, reply.text) == ("command", "unknown command /bogus; /help lists them")
    assert len(model.calls) == 1
    stored = hub.store.get("user:1", reply.message_id)
    assert (stored.text, stored.agent, stored.via) == ("/bogus hello", "hub", "command")  # kept, never history
    # Agent names still address agents; a path is text, not a command.
    assert ask(hub, "/tasks buy eggs").agent == "tasks"
    path = ask(hub, "/usr/bin is a folder")
    assert path.kind == "agent" and model.calls[-1].messages[-1]["content"] == "/usr/bin is a folder"
    assert "/bogus" not in " ".join(m["content"] for m in model.calls[-1].messages)


def test_search_finds_emoji_and_never_returns_commands(tmp_path):
    hub = make_hub(tmp_path, ScriptedModel(default="ok"))
    ask(hub, "/search milk")
    ask(hub, "/facts")
    ask(hub, "we won the cup 🎉")
    ask(hub, "buy milk and search for the receipt")
    party = ask(hub, "/search 🎉").text
    assert "we won the cup 🎉" in party and "/search" not in party
    found = ask(hub, "/search milk").text
    assert "buy milk" in found
    assert "/search" not in found and "/facts" not in found


def test_counts_are_said_in_words_that_agree(tmp_path):
    hub = make_hub(tmp_path, ScriptedModel(default="ok"))
    ask(hub, "/remember my sister is called Ana")
    erased = ask(hub, "/forget all").text
    assert "(2 messages, 1 fact, 0 notes and emails, 0 tasks, 0 reminders, 0 lessons, 0 channel messages)" in erased  # /forget all is one
    assert format_usage(Usage(scope="user:1", messages=1, agent_calls=1, tokens_sent=10, full_history_tokens=20)).startswith(
        "1 message stored, 1 agent call."
    )
    assert format_usage(Usage(scope="user:1", messages=2, agent_calls=0, tokens_sent=0, full_history_tokens=0)).startswith(
        "2 messages stored, 0 agent calls."
    )


def test_a_hung_model_gets_an_apology_within_the_deadline_and_loses_nothing(tmp_path):
    async def hang(messages, tools):
        await asyncio.sleep(3600)

    hub = make_hub(tmp_path, FunctionModel(hang), reply_deadline=0.2, model_retries=10)
    reply = ask(hub, "add buy milk to my tasks")
    assert (reply.kind, reply.text) == ("error", MODEL_SLOW_REPLY)
    assert [m.text for m in hub.store.messages("user:1")] == ["add buy milk to my tasks"]
    (call,) = hub.store.calls("user:1")
    assert call["ok"] == 0 and '"deadline"' in call["extra"]
    assert hub.store.is_answered(reply.message_id)  # a redelivery is not answered twice


def test_in_a_group_the_current_message_carries_its_sender_like_the_history(tmp_path):
    model = ScriptedModel(default="ok")
    hub = make_hub(tmp_path, model)
    ask(hub, "add cake to the tasks", scope="group:-5", sender="Bob")
    ask(hub, "and milk to the tasks", scope="group:-5", sender="Alice")
    ask(hub, "add bread to my tasks", scope="user:1", sender="Alice")
    sent = [m["content"] for m in model.calls[1].messages[1:]]
    assert sent == ["Bob: add cake to the tasks", "ok", "Alice: and milk to the tasks"]
    assert model.calls[2].messages[-1]["content"] == "add bread to my tasks"  # private: no name needed
