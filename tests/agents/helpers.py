"""Shared helpers for the agent tests: a fixed clock, a tool context, a sync tool call."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

from scopehub.agents import Tool, ToolContext
from scopehub.memory import Store

# Wednesday 2024-05-01 14:30 UTC: every test runs on this clock unless it says otherwise.
NOW = datetime(2024, 5, 1, 14, 30, tzinfo=UTC).timestamp()


def make_ctx(
    store: Store,
    scope: str = "user:1",
    *,
    now: float = NOW,
    tz: str = "UTC",
    chat: str | None = "1",
    message_id: int | None = None,
) -> ToolContext:
    """A tool context on a fixed clock in the given time zone."""
    return ToolContext(store=store, scope=scope, chat=chat, message_id=message_id, clock=lambda: now, extra={"timezone": tz})


def call(tool: Tool, ctx: ToolContext, **arguments: Any) -> str:
    """Run a tool as the runtime would (validated arguments), synchronously."""
    return asyncio.run(tool.run(ctx, arguments))
