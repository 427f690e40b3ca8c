"""Context: exactly what one agent is sent for one message, counted in tokens.

:mod:`.builder` applies the scoping rules and the cache-friendly order (pure, no I/O);
:mod:`.prompt` makes each agent's stable prefix (persona, rules, tools); :mod:`.offer`
decides when the optional ``search_memory`` is offered; :mod:`.tokens` counts exact
tokens offline.
"""

from scopehub.hub.context.awareness import Awareness, render_awareness
from scopehub.hub.context.builder import (
    CACHE_MARK,
    EXTRA_SECTIONS,
    SECTIONS,
    STABLE_SECTIONS,
    AgentPrompt,
    Context,
    build_context,
    fixed_tokens,
    render_history,
    select_history,
    stable_prefix,
)
from scopehub.hub.context.offer import refers_to_past, wants_archive
from scopehub.hub.context.prompt import HUB_RULES, agent_prompt
from scopehub.hub.context.tokens import (
    MESSAGE_OVERHEAD,
    Tokenizer,
    count_message_tokens,
    get_tokenizer,
)

__all__ = [
    "CACHE_MARK",
    "EXTRA_SECTIONS",
    "HUB_RULES",
    "MESSAGE_OVERHEAD",
    "SECTIONS",
    "STABLE_SECTIONS",
    "AgentPrompt",
    "Awareness",
    "Context",
    "Tokenizer",
    "agent_prompt",
    "build_context",
    "count_message_tokens",
    "fixed_tokens",
    "get_tokenizer",
    "refers_to_past",
    "render_awareness",
    "render_history",
    "select_history",
    "stable_prefix",
    "wants_archive",
]
