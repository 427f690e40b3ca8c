"""Context, the third stage of a turn: every section an agent call is sent, read fail-open.

The store is read here (facts, events, claims, channel messages, lessons, the digest);
the pure builder (:func:`scopehub.hub.context.build_context`) lays the sections out and
counts them. A section that cannot be read is left out with a log line: it never blocks
or loses a reply.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

from scopehub.agents import AgentRegistry, AgentSpec, Channel, channels_of, format_channel_message
from scopehub.hub.context import Context, build_context
from scopehub.hub.context.awareness import (
    Awareness,
    ChannelItem,
    relative_time,
    render_awareness,
    still_talked_about,
)
from scopehub.hub.context.builder import select_history
from scopehub.hub.context.lessons import render_lessons
from scopehub.hub.context.offer import wants_team
from scopehub.hub.context.prompt import AgentPrompt
from scopehub.hub.context.tokens import Tokenizer
from scopehub.hub.digest.service import BACKGROUND_CLAIMS, DigestSection
from scopehub.hub.orchestrator._types import Deps, Inbound
from scopehub.hub.routing import Route
from scopehub.hub.turns import is_bookkeeping
from scopehub.memory import (
    ChatSettings,
    Event,
    Message,
    Store,
    agent_memory,
    agent_memory_queries,
    awareness_reads,
    chat_settings,
    chat_settings_of_rows,
    chat_settings_query,
    count_unconsumed,
    count_unseen_channel_messages,
    performance_of,
    performance_queries,
    research_of,
    research_query,
    unconsumed_events,
)

__all__ = [
    "AWARENESS_CONTEXT",
    "AWARENESS_EARLIER",
    "AWARENESS_EVENTS",
    "AWARENESS_HORIZON",
    "CHANNEL_DIGEST",
    "CHANNEL_PINS",
    "LATER_REPLIES",
    "RECORD_DAYS",
    "RESEARCH_SHOWN",
    "PreparedCall",
    "Sections",
    "lessons_section",
    "order_by_turn",
]

log = logging.getLogger(__name__)

AWARENESS_EVENTS = 20  # unconsumed events read per call (newest first); the budget decides how many are shown
AWARENESS_CONTEXT = 3  # latest events of collaborators considered...
AWARENESS_HORIZON = 6 * 3600.0  # ...when they are this recent (seconds): old news is not news
AWARENESS_EARLIER = 20  # newest consumed events checked for being still talked about (hub.context.awareness)
CHANNEL_DIGEST = 10  # unseen channel messages read per call; the awareness budget decides how many are shown
LATER_REPLIES = 200  # messages after the current one looked at for replies to earlier ones (a queue's length)


def order_by_turn(messages: Sequence[Message]) -> list[Message]:
    """Messages in conversation order: each reply right after the message it answers (then by id).

    A reply without ``reply_to`` (a notice, an imported line) keeps its own place.
    """

    def turn(message: Message) -> tuple[int, int, int]:
        if message.role == "agent" and message.reply_to is not None:
            return (message.reply_to, 1, message.id)
        return (message.id, 0, message.id)

    return sorted(messages, key=turn)
CHANNEL_DIGEST = 10  # unseen channel messages read per call (newest first); the awareness budget decides how many are shown
RECORD_DAYS = 30  # the performance digest in the lessons section covers this many days
RESEARCH_SHOWN = 3  # the agent's newest research entries offered to its lessons section
CHANNEL_PINS = 10  # pinned channel messages read per call (newest first): shown on every call while pinned


@dataclass(frozen=True)
class PreparedCall:
    """One agent call of a turn, ready to run: what it answers and everything it is sent."""

    inbound: Inbound
    message: Message
    decision: Route
    spec: AgentSpec
    text: str  # the message as the agent reads it (the router may have rewritten it)
    context: Context
    awareness: Awareness
    digest: DigestSection
    timezone: str = "UTC"  # the chat's own (/settings), else HUB_TIMEZONE: how the tools read and write times


def lessons_section(store: Store, scope: str, agent: str, *, tokenizer: Tokenizer, budget: int, now: float) -> str:
    """``agent``'s lessons section as its calls get it: its memory, its record of the last
    RECORD_DAYS days and its newest research (``agents-hub memory show`` prints the same)."""
    since = now - RECORD_DAYS * 86400
    # The three reads in one batch: one round trip on PostgreSQL for every agent call, not three.
    *memory_rows, feedback_rows, event_rows, research_rows = store.query_batch(
        [*agent_memory_queries(scope, agent), *performance_queries(scope, agent, since=since), research_query(scope, agent, limit=RESEARCH_SHOWN)]
    )
    performance = performance_of(store, scope, agent, since=since, rows=[feedback_rows, event_rows])
    research = [(fragment, relative_time(fragment.ts, now)) for fragment in research_of(store, scope, agent, rows=research_rows)]
    return render_lessons(
        agent_memory(store, scope, agent, rows=memory_rows),
        tokenizer=tokenizer,
        budget=budget,
        performance=performance,
        record_days=RECORD_DAYS,
        research=research,
    )


class Sections:
    """Reads each section of an agent's call from the store; the builder assembles them."""

    def __init__(self, deps: Deps, registry: AgentRegistry, prompts: Mapping[str, AgentPrompt], channels: Mapping[str, Channel]) -> None:
        self.deps = deps
        self.registry = registry
        self.prompts = prompts
        self.channels = channels
        # Inside settings_read_once(), per thread: .settings (scope -> ChatSettings) and
        # .windows ((scope, before_id) -> the recent() read ahead by read_turn_start()).
        self._read = threading.local()

    @contextmanager
    def settings_read_once(self) -> Iterator[None]:
        """Within the block (one step of a turn, in one thread), each chat's settings are read
        once: the route, the facts block and the call's time zone ask for them (three reads).
        What :meth:`read_turn_start` read ahead (the settings, the recent messages) is kept
        for the block too."""
        outer = getattr(self._read, "settings", None)
        outer_windows = getattr(self._read, "windows", None)
        self._read.settings = {} if outer is None else outer
        self._read.windows = {} if outer_windows is None else outer_windows
        try:
            yield
        finally:
            self._read.settings = outer
            self._read.windows = outer_windows

    def read_turn_start(self, scope: str, message_id: int) -> tuple[Message | None, bool]:
        """``(the stored message, whether it is answered)``, with the chat's settings and the
        :meth:`recent` messages before it read in the same batch (one round trip on
        PostgreSQL, not five) and kept for the rest of the :meth:`settings_read_once` block.

        When the batch fails, each read is made on its own, with its own failure handling
        (the settings' is fail-open), and nothing is kept."""
        store = self.deps.store
        read = getattr(self._read, "settings", None)
        windows = getattr(self._read, "windows", None)
        size = self.deps.settings.window
        try:
            queries = [store.get_query(scope, message_id), store.is_answered_query(message_id), chat_settings_query(scope)]
            if size > 0:
                queries += [store.window_query(scope, size, up_to=message_id - 1), store.messages_query(scope, after=message_id, limit=LATER_REPLIES)]
            rows = store.query_batch(queries)
        except Exception:
            log.debug("the turn's first reads of %s in one batch failed; reading them one by one", scope, exc_info=True)
            message = store.get(scope, message_id)
            return message, message is not None and store.is_answered(message_id)
        message = store.message_of_row(rows[0][0]) if rows[0] else None
        if read is not None:
            read[scope] = self._settings_or_defaults(scope, lambda: chat_settings_of_rows(scope, rows[2]))
        if windows is not None:
            earlier = store.window_of_rows(rows[3]) if size > 0 else []
            later = [store.message_of_row(row) for row in rows[4]] if size > 0 else []
            windows[(scope, message_id)] = self._recent_of(earlier, later, message_id)
        return message, store.answered_of_rows(rows[1])

    def chat_settings(self, scope: str) -> ChatSettings:
        """The chat's own settings (/settings); fail-open: a failure means the defaults, logged."""
        read: dict[str, ChatSettings] | None = getattr(self._read, "settings", None)
        if read is not None and scope in read:
            return read[scope]
        found = self._settings_or_defaults(scope, lambda: chat_settings(self.deps.store, scope))
        if read is not None:
            read[scope] = found
        return found

    @staticmethod
    def _settings_or_defaults(scope: str, read: Callable[[], ChatSettings]) -> ChatSettings:
        """``read()``, fail-open: a failure means the defaults, logged."""
        try:
            return read()
        except Exception:
            log.exception("settings of %s unavailable; answering with the defaults", scope)
            return ChatSettings(scope)

    def allowed_agents(self, scope: str) -> tuple[str, ...] | None:
        """The agents that answer in the chat (its /settings), None for all of them."""
        chosen = self.chat_settings(scope).agents
        if chosen is None:
            return None
        known = tuple(name for name in chosen if name in self.registry)
        return known or None  # every chosen agent gone from the team: the whole team answers

    def facts_block(self, scope: str) -> str:
        """The scope's facts for every call, with the chat's language when it chose one;
        fail-open: a failure means no facts, logged."""
        language = self.chat_settings(scope).language
        preference = f"- This chat's language is {language}: always answer in {language}." if language else ""
        if self.deps.facts is None:
            return preference
        try:
            block = self.deps.facts.block(scope, self.deps.tokenizer, self.deps.settings.facts_tokens)
        except Exception:
            log.exception("facts unavailable for %s; answering without them", scope)
            block = ""
        return "\n".join(part for part in (preference, block) if part)

    def recent(self, scope: str, before_id: int) -> list[Message]:
        """The scope's last HUB_WINDOW messages before ``before_id``, ordered by turn.

        A reply belongs right after the message it answers, wherever its id fell: when B
        arrived while A was being answered, A's reply is stored after B, and B must still
        see it (A, A's reply, B). So replies stored later to messages before ``before_id``
        are taken in too (:func:`order_by_turn`).
        """
        windows: dict[tuple[str, int], list[Message]] | None = getattr(self._read, "windows", None)
        if windows is not None and (scope, before_id) in windows:
            return list(windows[(scope, before_id)])
        store, size = self.deps.store, self.deps.settings.window
        earlier = store.window(scope, size, up_to=before_id - 1)
        if not earlier:
            return earlier
        return self._recent_of(earlier, store.messages(scope, after=before_id, limit=LATER_REPLIES), before_id)

    def _recent_of(self, earlier: list[Message], after: list[Message], before_id: int) -> list[Message]:
        """:meth:`recent` from the window before ``before_id`` and the messages after it."""
        if not earlier:
            return earlier
        later = [m for m in after if m.role == "agent" and m.reply_to is not None and m.reply_to < before_id]
        return order_by_turn([*earlier, *later])[-self.deps.settings.window :] if later else earlier

    def awareness_for(
        self,
        agent: str,
        scope: str,
        *,
        window: Sequence[Message] = (),
        also_sees: Sequence[str] = (),
        text: str = "",
    ) -> Awareness:
        """What the rest of the team did, for ``agent``; fail-open: a failure means no block, logged.

        ``window`` (the scope's recent messages before this one), ``also_sees`` and ``text``
        (the message) describe the call: events its history shows are not repeated, and
        events already shown come back while the talk still names them.
        """
        settings = self.deps.settings
        store = self.deps.store
        budget = settings.awareness_tokens
        spec = self.registry[agent]
        if budget <= 0:
            return Awareness()
        try:
            now = self.deps.clock()
            visible = {m.id for m in select_history(window, agent, also_sees, window=settings.window, tail=settings.tail)}
            in_window = [m for m in (window[-settings.window :] if settings.window > 0 else []) if m.via != "command"]
            channels = channels_of(agent, self.channels)
            # Every read but the unconsumed events (and the two counts) in one batch (one round
            # trip on PostgreSQL), the events with the cursor it read: two round trips, not seven.
            read = awareness_reads(
                store, scope, agent,
                interests=spec.interests, interesting=AWARENESS_EARLIER if in_window else 0,
                collaborators=spec.collaborators, collaborator_events=AWARENESS_CONTEXT,
                channels=channels, unseen=CHANNEL_DIGEST, pins=CHANNEL_PINS, now=now,
            )  # fmt: skip
            earlier: list[Event] = []
            if in_window and spec.interests:
                candidates = [
                    event
                    for event in read.interesting
                    if event.id <= read.cursor and event.message_id is not None and event.message_id >= in_window[0].id
                ]
                talk = [m.text for m in (in_window[-settings.tail :] if settings.tail > 0 else [])] + [text]
                earlier = still_talked_about(candidates, talk)
            # The newest unconsumed news first; how many older ones lie behind them is counted.
            unconsumed = unconsumed_events(
                store, scope, agent, interests=spec.interests, limit=AWARENESS_EVENTS, newest=True, cursor=read.cursor
            )
            older = (
                count_unconsumed(store, scope, agent, interests=spec.interests, up_to=unconsumed[0].id - 1)
                if len(unconsumed) >= AWARENESS_EVENTS
                else 0
            )
            collaborators = [event for event in read.collaborators if now - event.ts <= AWARENESS_HORIZON]
            # Housekeeping (digest compaction, reflection) and the hub's bookkeeping (the
            # scope's turn, owed messages, a pending /forget all) are not team work: not shown.
            claims = [c for c in read.claims if c.key not in BACKGROUND_CLAIMS and not is_bookkeeping(c.key)]
            unseen = read.unseen
            older_unseen = (
                count_unseen_channel_messages(store, scope, agent, channels, below=unseen[0].id) if len(unseen) >= CHANNEL_DIGEST else 0
            )
            unread = {m.id for m in unseen}
            pinned = [m for m in read.pinned if m.id not in unread]
            awareness = render_awareness(
                agent,
                unconsumed=unconsumed,
                older_unconsumed=older,
                collaborator_events=collaborators,
                earlier=earlier,
                visible=visible,
                claims=claims,
                channel_news=[ChannelItem(m.id, f"- {format_channel_message(m, relative_time(m.ts, now))}") for m in unseen],
                older_channel_news=older_unseen,
                pins=[f"- {format_channel_message(m, relative_time(m.ts, now))}" for m in pinned],
                now=now,
                tokenizer=self.deps.tokenizer,
                budget=budget,
            )
        except Exception:
            log.exception("awareness unavailable for %s/%s; answering without it", scope, agent)
            return Awareness()
        return awareness

    def lessons_for(self, agent: str, scope: str) -> str:
        """``agent``'s own memory for its calls (no other agent's); fail-open: a failure means no section, logged."""
        budget = self.deps.settings.lessons_tokens
        if budget <= 0:
            return ""
        try:
            return lessons_section(self.deps.store, scope, agent, tokenizer=self.deps.tokenizer, budget=budget, now=self.deps.clock())
        except Exception:
            log.exception("lessons unavailable for %s/%s; answering without them", scope, agent)
            return ""

    def digest_for(self, scope: str, before_id: int | None = None) -> DigestSection:
        """The scope's digest for a call (read only); fail-open: a failure means no section, logged."""
        if self.deps.digest is None:
            return DigestSection()
        try:
            return self.deps.digest.section(scope, before_id)
        except Exception:
            log.exception("digest unavailable for %s; answering without it", scope)
            return DigestSection()

    def build_call(
        self,
        agent: str,
        scope: str,
        recent: list[Message],
        text: str,
        also_sees: tuple[str, ...] = (),
        *,
        lessons: str = "",
        awareness: str = "",
        digest: str = "",
        sender: str | None = None,
        channel_news: bool = False,
    ) -> Context:
        """The context ``agent`` is sent for ``text`` (from ``sender``) after the ``recent`` messages.

        ``lessons``, ``awareness`` and ``digest`` are ready, budgeted text for their
        sections (empty: left out); the facts block is read here. ``channel_news``: the
        awareness shows unread channel messages (the team tool is offered to answer them).
        """
        settings = self.deps.settings
        return build_context(
            self.prompts[agent],
            recent,
            text,
            tokenizer=self.deps.tokenizer,
            also_sees=also_sees,
            facts_block=self.facts_block(scope),
            lessons=lessons,
            awareness=awareness,
            digest=digest,
            window=settings.window,
            tail=settings.tail,
            message_tokens=settings.message_tokens,
            offer_team=wants_team(text, channel_news=channel_news),
            scope=scope,
            sender=sender,
        )

    def context_for(self, agent: str, scope: str, message: Message, also_sees: tuple[str, ...] = ()) -> Context:
        """Exactly what ``agent`` is sent for ``message`` (the ``agents-hub context`` command)."""
        return self._assemble(agent, scope, message.id, self.recent(scope, message.id), message.text, also_sees, message.sender)[0]

    def prepare(self, inbound: Inbound, message: Message, decision: Route, window: list[Message]) -> PreparedCall:
        """The routed agent's call for ``message``, every section read and counted."""
        spec = self.registry[decision.agent]
        text = decision.text if decision.text else inbound.text
        context, awareness, digest = self._assemble(
            spec.name, inbound.scope, message.id, window, text, decision.also_sees, inbound.sender
        )
        timezone = self.chat_settings(inbound.scope).timezone or self.deps.settings.timezone
        return PreparedCall(inbound, message, decision, spec, text, context, awareness, digest, timezone)

    def _assemble(
        self,
        agent: str,
        scope: str,
        message_id: int,
        window: list[Message],
        text: str,
        also_sees: tuple[str, ...],
        sender: str | None,
    ) -> tuple[Context, Awareness, DigestSection]:
        awareness = self.awareness_for(agent, scope, window=window, also_sees=also_sees, text=text)
        lessons = self.lessons_for(agent, scope)
        digest = self.digest_for(scope, message_id)
        context = self.build_call(
            agent,
            scope,
            window,
            text,
            also_sees,
            lessons=lessons,
            awareness=awareness.text,
            digest=digest.text,
            sender=sender,
            channel_news=awareness.channels_shown > 0 or awareness.pins_shown > 0,
        )
        return context, awareness, digest
