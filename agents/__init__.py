"""The specialist agents, one module each, and what declares them.

Add an agent by adding one module here (or in another package, under the
``scopehub.agents`` entry-point group) that defines a module-level ``AgentSpec``.
"""

from ._dates import date_spans, parse_time, to_english
from ._memory_tool import search_memory
from ._registry import ENTRY_POINT_GROUP, AgentRegistry, discover_agents, load_agent_file
from ._spec import AgentSpec, Channel, Tool, ToolContext, ToolExample, tool
from ._team import (
    TEAM_CHANNEL,
    agent_tools,
    channels_of,
    format_channel_message,
    team,
    team_channels,
)

__all__ = [
    "ENTRY_POINT_GROUP",
    "TEAM_CHANNEL",
    "AgentRegistry",
    "AgentSpec",
    "Channel",
    "Tool",
    "ToolContext",
    "ToolExample",
    "agent_tools",
    "channels_of",
    "date_spans",
    "discover_agents",
    "format_channel_message",
    "load_agent_file",
    "parse_time",
    "search_memory",
    "team",
    "team_channels",
    "to_english",
    "tool",
]
