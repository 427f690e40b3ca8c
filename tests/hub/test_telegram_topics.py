"""One topic per agent in private chats (Bot API 9.3), through PTB's real client."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from scopehub.hub.models import LiteLLMModel
from scopehub.hub.models.testing import FunctionModel
from scopehub.memory import Store, chat_settings
from tests.fakes.bot_api import FakeBotAPI
from tests.fakes.openai_server import FakeOpenAI, text
from tests.hub.telegram_helpers import bot_run, echo, make_hub


def run_with_topics(tmp_path: Path, scenario: Any, *, topics: bool = True, hub: Any = None, **options: Any) -> None:
    """A bot whose getMe says whether it has topic mode (``topics``)."""
    bot_run(tmp_path, scenario, hub=hub or make_hub(tmp_path / "hub.db", FunctionModel(echo)), fake={"topics": topics}, **options)


def in_topic(tg: FakeBotAPI, text_: str, thread: int) -> None:
    tg.push_message(42, text_, message_thread_id=thread, extra={"is_topic_message": True})


def test_each_agent_answers_in_its_own_topic_and_a_topic_routes_to_its_agent(tmp_path: Path) -> None:
    async def scenario(hub, tg, bot) -> None:
        assert bot.topics.enabled
        tg.push_message(42, "add buy milk to my tasks")  # in the general chat
        (tasks,) = await tg.await_sent(1, chat_id=42)
        topics = tg.forum_topics(42)
        assert list(topics.values()) == ["Tasks"] and tasks["message_thread_id"] == next(iter(topics))
        tg.push_message(42, "note that the wifi password is hunter2")
        notes = (await tg.await_sent(2, chat_id=42))[1]
        assert notes["text"].startswith("[notes]") and tg.forum_topics(42)[notes["message_thread_id"]] == "Notes"
        # Written in the tasks topic, a notes-sounding message still goes to tasks, answered there.
        in_topic(tg, "note that the door code is 1234", tasks["message_thread_id"])
        there = (await tg.await_sent(3, chat_id=42))[2]
        assert there["text"].startswith("[tasks]") and there["message_thread_id"] == tasks["message_thread_id"]
        in_topic(tg, "/help", notes["message_thread_id"])  # a command is answered where it was asked
        assert (await tg.await_sent(4, chat_id=42))[3]["message_thread_id"] == notes["message_thread_id"]
        assert len(tg.calls("createForumTopic")) == 2  # made once per agent

    run_with_topics(tmp_path, scenario)
    with Store(tmp_path / "hub.db") as store:
        assert set(chat_settings(store, "user:42").topics) == {"tasks", "notes"}
        routed = store.find_ext("user:42", "42:5")
        assert (routed.agent, routed.via) == ("tasks", "explicit")


def test_a_streamed_answer_is_drafted_in_its_agents_topic(tmp_path: Path) -> None:
    answer = " ".join(f"word{n}" for n in range(30))
    with FakeOpenAI(default=lambda request: text(answer), stream_chunk_delay=0.05) as llm:
        hub = make_hub(tmp_path / "hub.db", LiteLLMModel("openai/fake", api_base=llm.base_url, api_key="sk-fake"))

        async def scenario(hub, tg, bot) -> None:
            tg.push_message(42, "add buy milk to my tasks")
            # The first reply's price is litellm's map: its import takes seconds on a loaded machine.
            (sent,) = await tg.await_sent(1, chat_id=42, timeout=60)
            drafts = tg.drafts(42)
            assert drafts and {d["message_thread_id"] for d in drafts} == {sent["message_thread_id"]}
            assert tg.forum_topics(42)[sent["message_thread_id"]] == "Tasks"

        run_with_topics(tmp_path, scenario, hub=hub, stream_every=0.1)


def test_without_topic_mode_or_with_topics_off_everything_stays_in_the_chat(tmp_path: Path) -> None:
    async def scenario(hub, tg, bot) -> None:
        assert not bot.topics.enabled
        tg.push_message(42, "add buy milk to my tasks")
        (sent,) = await tg.await_sent(1, chat_id=42)
        assert sent["message_thread_id"] is None and tg.calls("createForumTopic") == []

    run_with_topics(tmp_path, scenario, topics=False)
    run_with_topics(tmp_path / "off", scenario, hub=make_hub(tmp_path / "off.db", FunctionModel(echo), agent_topics="off"))
