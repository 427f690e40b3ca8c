"""The hub end to end with a scripted model: stored first, routed, scoped, recorded."""

from __future__ import annotations

import asyncio

import pytest

from scopehub.agents import AgentRegistry, AgentSpec
from scopehub.hub import Deps, Hub, Inbound, load_settings
from scopehub.hub.errors import ModelUnavailable
from scopehub.hub.models import ModelResponse
from scopehub.hub.models.testing import ScriptedModel
from scopehub.hub.orchestrator import MODEL_DOWN_REPLY, NO_MODEL_REPLY
from scopehub.memory import Store
from tests.helpers import registry_of

INBOX = AgentSpec(
    name="inbox",
    description="emails: keep pasted emails, extract deadlines, draft replies",
    instructions="Handle emails.",
    examples=("here is an email from my boss", "draft a reply to this mail"),
    keywords=("email", "mail"),
)


def registry() -> AgentRegistry:
    return registry_of(INBOX)


def make_hub(tmp_path, model=None, **settings) -> Hub:
    store = Store(tmp_path / "hub.db")
    return Hub(Deps(store=store, settings=load_settings(**settings), model=model), registry())


def ask(hub: Hub, text: str, scope: str = "user:1", **kw):
    return asyncio.run(hub.handle(Inbound(scope=scope, text=text, **kw)))


def test_message_is_committed_before_the_model_is_called(tmp_path):
    seen = {}

    def model_step(messages, tools):
        # Another connection sees the person's message while the model is working.
        import sqlite3

        conn = sqlite3.connect(tmp_path / "hub.db")
        seen["rows"] = conn.execute("SELECT text, agent FROM messages").fetchall()
        return "Added."

    hub = make_hub(tmp_path, ScriptedModel([model_step]))
    reply = ask(hub, "add buy milk to my tasks")
    assert seen["rows"] == [("add buy milk to my tasks", "tasks")]  # stored and tagged
    assert reply.text == "Added." and reply.agent == "tasks"


def test_reply_is_stored_with_the_agent_tag_and_the_call_recorded(tmp_path):
    hub = make_hub(tmp_path, ScriptedModel([ModelResponse(content="Done.", prompt_tokens=120, completion_tokens=3)]))
    reply = ask(hub, "add buy milk to my tasks")
    stored = hub.store.get(reply.scope, reply.reply_id)
    assert (stored.role, stored.agent, stored.text, stored.reply_to) == ("agent", "tasks", "Done.", reply.message_id)
    (call,) = hub.store.calls("user:1")
    assert call["agent"] == "tasks" and call["via"] == "local"
    assert call["total"] == reply.tokens["total"] > 0
    assert call["history"] == 0 and call["prompt_tokens"] == 120 and call["completion_tokens"] == 3
    assert call["full_history_tokens"] == reply.full_history_tokens


def test_each_agent_is_sent_only_its_own_history_plus_the_tail(tmp_path):
    model = ScriptedModel(default="ok")
    hub = make_hub(tmp_path, model, tail=2)
    ask(hub, "here is an email from my boss: the deadline for the Q3 report is Friday")
    for _ in range(3):
        ask(hub, "tell me a joke")
    ask(hub, "add buy milk to my tasks")
    sent = [m["content"] for m in model.calls[-1].messages[1:]]
    assert not any("Q3 report" in text for text in sent)  # inbox content is outside the tail
    assert sent[-1] == "add buy milk to my tasks"
    assert sent[:-1] == ["tell me a joke", "[general agent] ok"]  # the tail of 2


def test_also_sees_brings_the_referenced_email_into_the_tasks_call(tmp_path):
    model = ScriptedModel(default="ok")
    hub = make_hub(tmp_path, model, tail=2)
    ask(hub, "here is an email from Ram: the deadline for the Q3 report is Friday")
    for _ in range(3):
        ask(hub, "tell me a joke")
    reply = ask(hub, "put the deadline from that email on my tasks")
    assert (reply.agent, reply.also_sees) == ("tasks", ("inbox",))
    assert any("Q3 report" in m["content"] for m in model.calls[-1].messages)
    stored = hub.store.get(reply.scope, reply.message_id)
    assert (stored.agent, stored.also_sees) == ("tasks", ("inbox",))


def test_window_before_filter_through_the_hub(tmp_path):
    model = ScriptedModel(default="ok")
    hub = make_hub(tmp_path, model, window=6, tail=2)
    ask(hub, "add buy milk to my tasks")
    for _ in range(5):
        ask(hub, "tell me a joke")
    ask(hub, "add eggs to my todo list")
    sent = [m["content"] for m in model.calls[-1].messages[1:-1]]
    assert "add buy milk to my tasks" not in sent  # older than the window of 6
    assert len(sent) == 2


def test_explicit_address_and_reply_routing(tmp_path):
    model = ScriptedModel(default="ok")
    hub = make_hub(tmp_path, model)
    first = ask(hub, "/inbox anything new?", ext_id="10")
    assert (first.agent, first.via) == ("inbox", "explicit")
    assert model.calls[-1].messages[-1]["content"] == "anything new?"
    # the transport records the id it gave the bot's reply; a reply to it goes to inbox
    hub.store.conn.execute("UPDATE messages SET ext_id = '11' WHERE id = ?", (first.reply_id,))
    followed = ask(hub, "add buy milk to my tasks", reply_to_ext="11")
    assert (followed.agent, followed.via) == ("inbox", "reply")


def test_a_failing_model_gives_a_clear_reply_and_loses_nothing(tmp_path):
    hub = make_hub(tmp_path, ScriptedModel([ModelUnavailable("429 after retries")]))
    reply = ask(hub, "add buy milk to my tasks")
    assert reply.kind == "error" and reply.text == MODEL_DOWN_REPLY
    assert [m.text for m in hub.store.window("user:1", 10)] == ["add buy milk to my tasks"]
    (call,) = hub.store.calls("user:1")
    assert call["ok"] == 0


def test_no_model_configured_is_a_clear_reply(tmp_path):
    reply = ask(make_hub(tmp_path, None), "hi")
    assert reply.text == NO_MODEL_REPLY
    assert reply.kind == "error"


def test_unaddressed_group_chatter_is_stored_and_tagged_but_not_answered(tmp_path):
    model = ScriptedModel()
    hub = make_hub(tmp_path, model)
    assert ask(hub, "add buy milk to my tasks", scope="group:-100", addressed=False) is None
    assert model.calls == []
    (stored,) = hub.store.window("group:-100", 5)
    assert stored.agent == "tasks"


def test_commands_answer_without_the_model(tmp_path):
    model = ScriptedModel()
    hub = make_hub(tmp_path, model)
    assert "/tasks" in ask(hub, "/agents").text
    assert "Tokens sent" in ask(hub, "/usage").text
    assert model.calls == []


def test_scopes_never_see_each_other(tmp_path):
    model = ScriptedModel(default="ok")
    hub = make_hub(tmp_path, model)
    ask(hub, "add secret project zebra to my tasks", scope="user:1")
    ask(hub, "what is on my todo list", scope="group:-7")
    assert not any("zebra" in m["content"] for m in model.calls[-1].messages)


def test_messages_of_one_scope_are_handled_in_order_while_scopes_run_concurrently(tmp_path):
    order: list[str] = []
    events: dict[str, asyncio.Event] = {}

    async def model_step(messages, tools):
        text = messages[-1]["content"]
        if text == "note 1-0":
            # user:1's first call finishes only once a call of user:2 has run meanwhile:
            # with one lock for every scope that never happens (a deadlock).
            await events["user:2 answered"].wait()
        order.append(text)
        if text.startswith("note 2-"):
            events["user:2 answered"].set()
        return "ok"

    hub = make_hub(tmp_path, ScriptedModel(default=model_step))

    async def main():
        events["user:2 answered"] = asyncio.Event()
        inbounds = [Inbound(scope=f"user:{s}", text=f"note {s}-{i}") for i in range(3) for s in (1, 2)]
        await asyncio.wait_for(asyncio.gather(*(hub.handle(inbound) for inbound in inbounds)), timeout=10)

    try:
        asyncio.run(main())
    except TimeoutError:
        pytest.fail(f"user:2 waited for user:1's model call (one lock for every scope?); answered: {order}")
    assert order.index("note 2-0") < order.index("note 1-0")  # user:2 went on while user:1 waited
    for s in (1, 2):
        # user:1's later messages waited for its first one: one scope, one message at a time
        assert [t for t in order if t.startswith(f"note {s}-")] == [f"note {s}-{i}" for i in range(3)]
        assert [m.text for m in hub.store.window(f"user:{s}", 10) if m.role == "user"] == [f"note {s}-{i}" for i in range(3)]


def test_llm_router_is_used_when_configured_and_falls_back_on_junk(tmp_path):
    router = ScriptedModel(['{"agent": "inbox", "also_sees": []}', "junk"])
    store = Store(tmp_path / "hub.db")
    hub = Hub(Deps(store=store, settings=load_settings(router_model="openai/router"), model=ScriptedModel(default="ok"), router_model=router), registry())
    assert ask(hub, "hmm, what about this one").via == "llm"
    fallback = ask(hub, "add buy milk to my tasks")
    assert (fallback.agent, fallback.via) == ("tasks", "local")


@pytest.mark.parametrize("name,value", [("HUB_WINDOW", "many"), ("HUB_TAIL", "-1"), ("HUB_TIMEZONE", "Mars/Base")])
def test_bad_settings_name_the_variable(monkeypatch, name, value):
    from scopehub.hub.errors import ConfigError

    monkeypatch.setenv(name, value)
    with pytest.raises(ConfigError, match=name):
        load_settings()


def test_settings_are_read_from_a_dotenv_file(tmp_path):
    (tmp_path / ".env").write_text("HUB_WINDOW=12\nHUB_TAIL=3\n")
    settings = load_settings()
    assert (settings.window, settings.tail) == (12, 3)


def test_a_redelivered_message_is_stored_once_and_answered_once(tmp_path):
    model = ScriptedModel(default="ok")
    hub = make_hub(tmp_path, model)
    first = ask(hub, "add buy milk to my tasks", ext_id="77")
    assert first.text == "ok"
    assert ask(hub, "add buy milk to my tasks", ext_id="77") is None  # already answered
    assert len(model.calls) == 1
    assert [m.text for m in hub.store.window("user:1", 10) if m.role == "user"] == ["add buy milk to my tasks"]


def test_a_message_stored_before_a_crash_is_answered_when_redelivered(tmp_path):
    from scopehub.memory import NewMessage

    model = ScriptedModel(default="ok")
    hub = make_hub(tmp_path, model)
    # The process died after storing the message and before any model call.
    hub.store.append(NewMessage(scope="user:1", role="user", text="add buy milk to my tasks", ext_id="78"))
    reply = ask(hub, "add buy milk to my tasks", ext_id="78")
    assert reply is not None and reply.text == "ok" and reply.agent == "tasks"
    assert hub.store.count_messages("user:1") == 2  # the message once, and its reply


def test_a_model_that_rejects_the_request_gets_its_own_clear_reply(tmp_path):
    from scopehub.hub.errors import ModelError
    from scopehub.hub.orchestrator import MODEL_FAILED_REPLY

    hub = make_hub(tmp_path, ScriptedModel([ModelError("400 bad request")]))
    reply = ask(hub, "add buy milk to my tasks")
    assert (reply.kind, reply.text) == ("error", MODEL_FAILED_REPLY)
    assert hub.store.count_messages("user:1") == 1


def test_the_router_and_the_fact_extractor_count_in_usage_apart_from_agent_calls(tmp_path):
    from scopehub.hub.commands import format_usage, usage_figures
    from scopehub.hub.facts import FactKeeper

    router = ScriptedModel([ModelResponse(content='{"agent": "inbox", "also_sees": []}', prompt_tokens=120, completion_tokens=9)])
    extractor = ScriptedModel([ModelResponse(content='{"facts": []}', prompt_tokens=300, completion_tokens=6)])
    store = Store(tmp_path / "hub.db")
    hub = Hub(
        Deps(
            store=store,
            settings=load_settings(router_model="openai/router"),
            model=ScriptedModel(default="ok"),
            router_model=router,
            facts=FactKeeper(store, extractor),
        ),
        registry(),
    )

    async def talk():
        reply = await hub.handle(Inbound(scope="user:1", text="hmm, my email is ann@example.com"))
        await hub.after_send(reply)
        return reply

    reply = asyncio.run(talk())
    assert reply.via == "llm"
    figures = usage_figures(store.usage("user:1"))
    assert figures["router"] == {"calls": 1, "tokens": 129}
    assert figures["fact_extraction"] == {"calls": 1, "tokens": 306}
    assert figures["agent_calls"] == 1  # the hub's own calls are not agent calls, nor in the saving
    assert "LLM router 1 call, 129 tokens; fact extraction 1 call, 306 tokens" in format_usage(store.usage("user:1"))
    assert store.usage("user:2").router_calls == 0  # scoped like everything else


def test_a_turn_reads_the_chats_settings_once_and_the_next_turn_reads_them_again(tmp_path, monkeypatch):
    from scopehub.hub.orchestrator import _sections
    from scopehub.memory import update_chat_settings

    reads: list[str] = []
    original = _sections.chat_settings

    def counting(store, scope):
        reads.append(scope)
        return original(store, scope)

    monkeypatch.setattr(_sections, "chat_settings", counting)
    sent: list[str] = []

    def model_step(messages, tools):
        sent.append(" ".join(str(m.get("content") or "") for m in messages))
        return "Done."

    hub = make_hub(tmp_path, ScriptedModel([model_step, model_step]))
    update_chat_settings(hub.store, "user:1", language="Deutsch", timezone="Europe/Berlin", now=1.0)
    ask(hub, "add buy milk to my tasks")
    assert reads == ["user:1"]  # the route, the facts block and the time zone: one read
    assert "This chat's language is Deutsch" in sent[0]
    update_chat_settings(hub.store, "user:1", language="Français", now=2.0)
    ask(hub, "add eggs to my tasks")
    assert reads == ["user:1", "user:1"] and "This chat's language is Français" in sent[1]  # never kept across turns


def test_the_chats_answered_at_once_and_the_store_threads_are_settings(monkeypatch, tmp_path):
    """HUB_TURN_SLOTS bounds the chats a Telegram worker answers at once, HUB_DB_THREADS the
    threads its store work runs in (0: the default, 8, two fewer than the pool's connections)."""
    from scopehub.hub import dbwork
    from scopehub.hub.transports.telegram.application import build_application

    monkeypatch.setenv("HUB_TURN_SLOTS", "3")
    monkeypatch.setenv("HUB_DB_THREADS", "2")
    settings = load_settings()
    assert (settings.turn_slots, settings.db_threads) == (3, 2)
    hub = make_hub(tmp_path, ScriptedModel(default="ok"))
    app = build_application(hub, settings, token="1:x", base_url="http://127.0.0.1:9")
    assert app.update_processor.max_active == 3
    try:
        assert dbwork.use_db_threads(settings.db_threads) == 2 and dbwork.db_executor()._max_workers == 2
        assert dbwork.use_db_threads(0) == dbwork.DB_THREADS == 8 and dbwork.db_executor()._max_workers == 8
    finally:
        dbwork.use_db_threads(0)
    monkeypatch.delenv("HUB_TURN_SLOTS")
    assert load_settings().turn_slots == 64
