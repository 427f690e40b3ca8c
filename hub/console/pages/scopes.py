"""The scopes list: every scope with its messages, last activity, calls, tokens, saving,
cost, failed calls, pending reminders and Maildir backlog; sortable by each, paged."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from scopehub.hub.console import stats
from scopehub.hub.console.web import Console
from scopehub.hub.settings import maildir_root
from scopehub.memory import list_reminders

__all__ = ["SCOPES_PER_PAGE", "routes"]

SCOPES_PER_PAGE = 50


def routes(console: Console) -> list[Route]:
    store, settings = console.store, console.settings

    def waiting_mail() -> dict[str, int]:
        waiting: dict[str, int] = {}
        root = maildir_root(settings)
        if root.exists():
            from scopehub.hub.transports.maildir.status import backlog as maildir_backlog

            for box in maildir_backlog(root, outbox=False):
                if box.scope is not None:
                    waiting[box.scope] = waiting.get(box.scope, 0) + box.waiting
        return waiting

    def scopes_page(request: Request) -> Response:
        from scopehub.hub.console.pages import scopes as this  # the page size, patched by tests

        per_page = this.SCOPES_PER_PAGE
        sort = request.query_params.get("sort", "activity")
        sort = sort if sort in stats.SCOPE_SORTS else "activity"
        order = request.query_params.get("order", "")
        descending = {"asc": False, "desc": True}.get(order)
        page_number = console.int_param(request, "page", 1, low=1, high=1_000_000) or 1
        tally = console.tallies.current()
        rows = stats.scope_rows(store, tally, sort, descending=descending)
        shown = rows[(page_number - 1) * per_page : page_number * per_page]
        waiting = waiting_mail()
        reminders = {row.scope: len(list_reminders(store, row.scope, limit=1000)) for row in shown}  # active ones
        pages = max(1, -(-len(rows) // per_page))
        return console.page(
            request,
            "scopes.html",
            rows=shown,
            total=len(rows),
            page_number=page_number,
            pages=pages,
            sort=sort,
            order=order,
            descending=(sort != "name") if descending is None else descending,
            reminders=reminders,
            waiting=waiting,
            totals=stats.overall_totals(store, tally),
            done=console.notice(request),
        )

    return [Route("/", scopes_page)]
