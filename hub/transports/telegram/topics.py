"""One topic per agent in private chats, where the client supports it (Bot API 9.3).

A bot whose forum topic mode is on (BotFather; ``getMe`` says ``has_topics_enabled``)
can keep a private chat in topics. With ``HUB_AGENT_TOPICS=auto`` each agent gets its
own: its first answer in the chat creates the topic (``createForumTopic``, named after
the agent) and every later answer of that agent goes there. A message written in an
agent's topic goes to that agent, as ``/agent`` would; one in the general chat is routed
as usual, and its answer lands in the topic of the agent that answers. The topics are
kept with the chat's settings, so every worker uses the same ones. A chat (or server)
that refuses topics is answered in the general chat, as without them.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from telegram import Bot
from telegram.error import TelegramError

from scopehub.hub.transports.telegram.delivery import call_with_retry
from scopehub.memory import chat_settings, set_agent_topic

if TYPE_CHECKING:
    from scopehub.hub.transports.telegram.bot import TelegramBot

__all__ = ["AgentTopics", "topic_name"]

log = logging.getLogger(__name__)


def topic_name(agent: str) -> str:
    """The topic's title: the agent's name as people read it ("tasks" -> "Tasks")."""
    return agent.replace("_", " ").capitalize()[:128]


class AgentTopics:
    """The agents' topics in private chats of one :class:`~.bot.TelegramBot`."""

    def __init__(self, transport: TelegramBot) -> None:
        self.transport = transport
        self.enabled = False  # set at start: HUB_AGENT_TOPICS=auto and the bot has topic mode
        self._refused: set[int] = set()  # chats where createForumTopic failed: answered in general

    @property
    def hub(self) -> Any:
        return self.transport.hub

    def start(self, bot: Bot) -> None:
        """Turn topics on when configured and the bot has topic mode (``getMe``)."""
        me = getattr(bot, "bot", None)
        self.enabled = self.transport.settings.agent_topics == "auto" and bool(getattr(me, "has_topics_enabled", False))
        if self.enabled:
            log.info("private chats: one topic per agent (the bot has forum topic mode)")

    def agent_of_thread(self, scope: str, thread_id: int | None) -> str | None:
        """The agent whose topic ``thread_id`` is in a private chat (None: not an agent's topic)."""
        if not self.enabled or thread_id is None or not scope.startswith("user:"):
            return None
        try:
            topics = chat_settings(self.hub.store, scope).topics
        except Exception as exc:  # routed as usual then
            log.warning("topics of %s unreadable (%s)", scope, exc)
            return None
        return next((agent for agent, thread in topics.items() if thread == thread_id and agent in self.hub.registry), None)

    async def thread_for(self, bot: Bot, chat_id: int, scope: str, agent: str | None) -> int | None:
        """The topic an answer of ``agent`` goes to in a private chat, made on first use; None: the general chat."""
        if not self.enabled or agent is None or agent not in self.hub.registry or not scope.startswith("user:") or chat_id in self._refused:
            return None
        topics = chat_settings(self.hub.store, scope).topics
        if agent in topics:
            return topics[agent]
        # Only the holder of the scope's turn sends its answers, so one worker makes a topic.
        try:
            topic = await call_with_retry(
                lambda: bot.create_forum_topic(chat_id, topic_name(agent)), self.transport.retry, f"createForumTopic {agent}"
            )
        except TelegramError as exc:
            self._refused.add(chat_id)
            log.info("chat %s takes no topics (%s); answering in the general chat", chat_id, exc)
            return None
        set_agent_topic(self.hub.store, scope, agent, topic.message_thread_id, now=self.hub.deps.clock())
        log.info("made the %s topic (%s) in chat %s", agent, topic.message_thread_id, chat_id)
        return topic.message_thread_id
