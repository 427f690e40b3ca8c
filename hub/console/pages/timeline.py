"""The timeline of a scope: its messages newest first, each with its route and its calls,
filtered by agent, route, failed calls, tool calls and dates, with a jump to a date or a
message id and the first and last pages. Also the one place that renders a list of
messages with their links (:func:`message_items`), which the search and sandbox reuse.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from scopehub.hub.console import queries
from scopehub.hub.console.charts import SECTION_COLOURS, section_legend, stacked_bar
from scopehub.hub.console.dates import day_range, parse_jump
from scopehub.hub.console.queries import Filters
from scopehub.hub.console.urls import scope_url
from scopehub.hub.console.web import Console
from scopehub.memory import Message

__all__ = ["MessageItem", "message_items", "routes"]

PAGE_SIZE = 50  # timeline messages per page
MAX_PAGE_SIZE = 200
HUB_VIAS = ("router", "extractor")


@dataclass(slots=True)
class MessageItem:
    """One message as the pages show it: with its calls, its reply (or what it replies to) and their calls."""

    message: Message
    calls: list[dict[str, Any]] = field(default_factory=list)
    reply_id: int | None = None  # a person's message: the agent's reply to it
    answered_by: dict[str, Any] | None = None  # an agent's reply: the call that wrote it
    bars: dict[int, Any] = field(default_factory=dict)


def message_items(store: Any, scope: str, messages: Sequence[Message], *, bars: bool = True) -> list[MessageItem]:
    """``messages`` with their calls and both-way reply links (three queries for the lot)."""
    ids = [m.id for m in messages]
    asked = [m.reply_to for m in messages if m.role == "agent" and m.reply_to is not None]
    calls = queries.calls_of_messages(store, scope, list(dict.fromkeys(ids + asked)))
    replies = queries.replies_to(store, scope, [m.id for m in messages if m.role == "user"])
    items = []
    for m in messages:
        item = MessageItem(m, calls=calls.get(m.id, []) if m.role == "user" else [], reply_id=replies.get(m.id))
        if m.role == "agent" and m.reply_to is not None:
            item.answered_by = next((c for c in calls.get(m.reply_to, []) if c["via"] not in HUB_VIAS and c["agent"] == m.agent), None)
        if bars:
            item.bars = {
                c["id"]: stacked_bar(
                    [("", {k: int(c[k] or 0) for k in SECTION_COLOURS})], width=420, bar_height=12, legend=False, css_class="mini-bar"
                )
                for c in item.calls
                if c["via"] not in HUB_VIAS
            }
        items.append(item)
    return items


def filters_of(console: Console, request: Request) -> Filters:
    """The timeline's filters from the query string (400 for a bad date)."""
    query = request.query_params
    try:
        since, until = day_range(query.get("from", ""), query.get("to", ""), console.zone)
    except ValueError as exc:
        raise HTTPException(400, str(exc)) from None
    return Filters(
        agent=query.get("agent", "").strip() or None,
        via=query.get("via", "").strip() or None,
        failed=query.get("failed") == "1",
        tools=query.get("tools") == "1",
        since=since,
        until=until,
    )


def filter_query(request: Request) -> dict[str, str]:
    """The filter part of the query string, for links that keep the filters."""
    return {name: request.query_params.get(name, "") for name in ("agent", "via", "failed", "tools", "from", "to")}


def routes(console: Console) -> list[Route]:
    store = console.store

    def jump(request: Request, scope: str, filters: Filters, size: int, text: str) -> Response:
        """Redirect a jump (``go``) to the page that shows it, the target marked."""
        keep = {**filter_query(request), "n": size if size != PAGE_SIZE else None}
        target = parse_jump(text, console.zone)
        if target is None:
            raise HTTPException(400, f"{text!r} is neither a message id (#1234) nor a date (YYYY-MM-DD, optionally HH:MM)")
        if target.message_id is not None:
            message = store.get(scope, target.message_id)
            if message is None:
                raise HTTPException(404, f"no message #{target.message_id} in {scope}")
            return RedirectResponse(scope_url(scope, **keep, around=message.id) + f"#m{message.id}", status_code=303)
        found = queries.first_at_or_after(store, scope, float(target.ts or 0), filters)
        if found is None:
            return RedirectResponse(scope_url(scope, **keep, after=MAX_AFTER, went=text), status_code=303)
        # A day opens at its first message: that one at the bottom, the rest of the day above it.
        return RedirectResponse(scope_url(scope, **keep, after=found - 1, went=text) + f"#m{found}", status_code=303)

    def timeline_page(request: Request) -> Response:
        scope = console.scope_of(request)
        filters = filters_of(console, request)
        size = console.int_param(request, "n", PAGE_SIZE, low=1, high=MAX_PAGE_SIZE) or PAGE_SIZE
        go = request.query_params.get("go", "").strip()
        if go:
            return jump(request, scope, filters, size, go)
        around = console.int_param(request, "around", None, low=1)
        before = console.int_param(request, "before", None, low=1)
        after = console.int_param(request, "after", None, low=0)
        if around is not None:
            newer = queries.message_page(store, scope, filters, after=around, limit=size // 2)
            ids = newer + queries.message_page(store, scope, filters, before=around + 1, limit=size - len(newer))
        elif after is not None:
            ids = queries.message_page(store, scope, filters, after=after, limit=size)
        else:
            ids = queries.message_page(store, scope, filters, before=before, limit=size)
        if not ids and after is not None and after > 0:  # past the newest (a jump beyond the last date): the last page
            ids = queries.message_page(store, scope, filters, limit=size)
        has_older = bool(ids) and bool(queries.message_page(store, scope, filters, before=ids[-1], limit=1))
        has_newer = bool(ids) and bool(queries.message_page(store, scope, filters, after=ids[0], limit=1))
        went = request.query_params.get("went", "")
        return console.page(
            request,
            "timeline.html",
            scope=scope,
            count=store.count_messages(scope),
            matching=queries.count_matching(store, scope, filters) if filters.active else None,
            count_cap=queries.COUNT_CAP,
            items=message_items(store, scope, queries.messages_by_id(store, scope, ids)),
            legend=section_legend(),
            older=ids[-1] if has_older else None,
            newer=ids[0] if has_newer else None,
            at_first=not has_newer,
            size=size,
            keep={**filter_query(request), "n": size if size != PAGE_SIZE else ""},
            filters=filter_query(request),
            agents=sorted(console.prompts),
            vias=("explicit", "reply", "local", "sticky", "llm", "default", "command", "import"),
            target=around,
            went=went,
            went_missing=bool(went) and after == MAX_AFTER,
        )

    return [Route("/scopes/{scope:scope}", timeline_page)]


MAX_AFTER = 2**62  # "after the newest message": a jump to a date past the last one
