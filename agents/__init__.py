"""The specialist agents, one module each, and what declares them.

Add an agent by adding one module here (or in another package, under the
``scopehub.agents`` entry-point group) that defines a module-level ``AgentSpec``.
"""

from ._memory_tool import search_memory
from ._registry import ENTRY_POINT_GROUP, AgentRegistry, discover_agents, load_agent_file
from ._spec import AgentSpec, Tool, ToolContext, ToolExample, tool

__all__ = [
    "ENTRY_POINT_GROUP",
    "AgentRegistry",
    "AgentSpec",
    "Tool",
    "ToolContext",
    "ToolExample",
    "discover_agents",
    "load_agent_file",
    "search_memory",
    "tool",
]
