"""The Hub and the stages of a turn.

Transports (Telegram, terminal, Maildir, eval replays) normalise what they receive into
an ``Inbound`` and call :meth:`Hub.handle`. A turn runs in stages, one module each:
intake (the message is committed before any model call, so a failing model never loses
it) → route → context → run → record → after the reply (learning, off the request path).
"""

from scopehub.hub.orchestrator._hub import Hub
from scopehub.hub.orchestrator._intake import UNKNOWN_COMMAND_REPLY
from scopehub.hub.orchestrator._run import (
    MODEL_DOWN_REPLY,
    MODEL_FAILED_REPLY,
    MODEL_SLOW_REPLY,
    NO_ANSWER_REPLY,
    NO_MODEL_REPLY,
)
from scopehub.hub.orchestrator._sections import (
    AWARENESS_CONTEXT,
    AWARENESS_EARLIER,
    AWARENESS_EVENTS,
    AWARENESS_HORIZON,
    CHANNEL_DIGEST,
)
from scopehub.hub.orchestrator._types import (
    CommandHandler,
    Deps,
    DigestService,
    FactsService,
    Inbound,
    LessonService,
    ReflectionService,
    Reply,
)

__all__ = [
    "AWARENESS_CONTEXT",
    "AWARENESS_EARLIER",
    "AWARENESS_EVENTS",
    "AWARENESS_HORIZON",
    "CHANNEL_DIGEST",
    "MODEL_DOWN_REPLY",
    "MODEL_FAILED_REPLY",
    "MODEL_SLOW_REPLY",
    "NO_ANSWER_REPLY",
    "NO_MODEL_REPLY",
    "UNKNOWN_COMMAND_REPLY",
    "CommandHandler",
    "Deps",
    "DigestService",
    "FactsService",
    "Hub",
    "Inbound",
    "LessonService",
    "ReflectionService",
    "Reply",
]
