"""Context: exactly what one agent is sent for one message, counted in tokens.

:mod:`.builder` applies the scoping rules (pure, no I/O); :mod:`.prompt` makes each
agent's stable prefix (persona, rules, tools); :mod:`.tokens` counts exact tokens offline.
"""

from scopehub.hub.context.awareness import Awareness, render_awareness
from scopehub.hub.context.builder import (
    SECTIONS,
    AgentPrompt,
    Context,
    build_context,
    render_history,
    select_history,
)
from scopehub.hub.context.prompt import HUB_RULES, agent_prompt
from scopehub.hub.context.tokens import (
    MESSAGE_OVERHEAD,
    Tokenizer,
    count_message_tokens,
    get_tokenizer,
)

__all__ = [
    "HUB_RULES",
    "MESSAGE_OVERHEAD",
    "SECTIONS",
    "AgentPrompt",
    "Awareness",
    "Context",
    "Tokenizer",
    "agent_prompt",
    "build_context",
    "count_message_tokens",
    "get_tokenizer",
    "render_awareness",
    "render_history",
    "select_history",
]
