"""The console's Starlette application: routes, templates and the write actions.

Pages are rendered on the server (Jinja2, autoescaped: every message text is data, never
HTML) and use no JavaScript. The endpoints are plain functions: Starlette runs them in its
thread pool, and the store serialises access behind its own lock.
"""

from __future__ import annotations

import os
import secrets
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote
from zoneinfo import ZoneInfo

import jinja2
from markupsafe import Markup
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.templating import Jinja2Templates

from scopehub.hub.console import queries
from scopehub.hub.console.access import AccessGuard, csrf_token
from scopehub.hub.console.calls import call_view
from scopehub.hub.console.charts import SECTION_COLOURS, Series, bar_chart, line_chart, stacked_bar
from scopehub.hub.context import AgentPrompt, agent_prompt
from scopehub.hub.context.tokens import Tokenizer, get_tokenizer
from scopehub.hub.settings import Settings, maildir_root
from scopehub.memory import (
    InvalidScope,
    MemoryStore,
    active_claims,
    agent_memory,
    cancel_reminder,
    channel_stats,
    digest_usage,
    emit_event,
    fact_history,
    get_digest,
    list_knowledge,
    list_reminders,
    list_tasks,
    read_channel,
    recent_events,
    summarize_event,
    validate_scope,
)

__all__ = ["ConsoleConfig", "create_app"]

HERE = Path(__file__).resolve().parent
PAGE_SIZE = 50  # timeline messages per page
MAX_PAGE_SIZE = 200
MAX_ID = 2**63 - 1  # the largest row id SQL integers hold
SCOPES_PER_PAGE = 50
OPERATOR = "operator"  # who the console's writes are attributed to in the event log
# What a write action reports after its redirect (a code in the URL, never text from it).
DONE = {
    "fact-forgotten": "Fact forgotten (with its older versions).",
    "fact-missing": "No such fact: nothing was changed.",
    "reminder-cancelled": "Reminder cancelled.",
    "reminder-missing": "No such active reminder: nothing was changed.",
    "scope-erased": "Scope erased from the store and the Maildir.",
}


@dataclass
class ConsoleConfig:
    """What the console runs on: the store, the settings, the agents' prompts, the write flag."""

    store: MemoryStore
    settings: Settings
    allow_writes: bool = False
    prompts: dict[str, AgentPrompt] = field(default_factory=dict)
    tokenizer: Tokenizer | None = None
    secret: bytes = field(default_factory=lambda: secrets.token_bytes(32))  # CSRF, per process


def _templates(config: ConsoleConfig) -> Jinja2Templates:
    # Autoescape on for every template: message texts are data, never HTML.
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(HERE / "templates"), autoescape=True, undefined=jinja2.StrictUndefined
    )
    zone = ZoneInfo(config.settings.timezone)

    def when(ts: float | None) -> str:
        if ts is None:
            return ""
        return datetime.fromtimestamp(float(ts), tz=UTC).astimezone(zone).strftime("%Y-%m-%d %H:%M:%S")

    def num(value: float | int | None) -> str:
        return "" if value is None else f"{round(value):,}"

    def saving(sent: int, full: int) -> str:
        return f"{100 * (1 - sent / full):.0f}%" if full else "–"

    env.filters.update(when=when, num=num)
    env.globals.update(
        scope_url=scope_url,
        saving=saving,
        zone=config.settings.timezone,
        allow_writes=config.allow_writes,
        colours=SECTION_COLOURS,
        csrf=lambda path: csrf_token(config.secret, path),
    )
    return Jinja2Templates(env=env)


def scope_url(scope: str, *rest: object) -> str:
    """The console path of a scope's page (``/scopes/user:42/memory``), every part quoted."""
    return "/scopes/" + quote(scope, safe=":") + "".join(f"/{quote(str(part), safe='')}" for part in rest)


def _scope_of(request: Request, store: MemoryStore) -> str:
    """The scope named in the URL, validated and present in the store (else 404)."""
    raw = request.path_params["scope"]
    try:
        scope = validate_scope(raw)
    except InvalidScope:
        raise HTTPException(404, f"{raw!r} is not a scope (user:<id> or group:<id>)") from None
    if not queries.scope_exists(store, scope):
        raise HTTPException(404, f"no data of {scope}")
    return scope


def _path_id(request: Request, name: str) -> int:
    """An id from the path; one no database row can have is a 404, not an overflow."""
    value = int(request.path_params[name])
    if value > MAX_ID:
        raise HTTPException(404, f"no such {name.split('_')[0]}")
    return value


def _int_param(request: Request, name: str, default: int | None, *, low: int = 0, high: int | None = None) -> int | None:
    raw = request.query_params.get(name)
    if raw in (None, ""):
        return default
    try:
        value = int(raw)
    except ValueError:
        raise HTTPException(400, f"{name} must be a whole number, not {raw!r}") from None
    if value < low or (high is not None and value > high):
        raise HTTPException(400, f"{name} must be between {low} and {high if high is not None else 'any'}")
    return value


BUCKETS = (3600, 86400, 7 * 86400, 30 * 86400, 365 * 86400)  # an hour, a day, a week, a month, a year


def _token_chart(store: MemoryStore, scope: str | None, zone: ZoneInfo) -> tuple[Markup, int, int]:
    """Tokens sent and full history summed per hour, day, week... (whichever gives at most ~60 points)."""
    span = queries.token_span(store, scope)
    if span is None:
        return line_chart([]), 0, 0
    size = next((s for s in BUCKETS if (span[1] - span[0]) / s <= 60), BUCKETS[-1])
    rows = queries.token_buckets(store, scope, size)
    fmt = "%m-%d %H:00" if size == 3600 else "%Y-%m-%d"
    step = max(1, len(rows) // 6)
    labels = {row[0]: datetime.fromtimestamp(row[0], tz=UTC).astimezone(zone).strftime(fmt) for row in rows[::step]}
    series = [
        Series("tokens sent", "#4e79a7", [(start, sent) for start, _, sent, _ in rows]),
        Series("full history would be", "#e15759", [(start, full) for start, _, _, full in rows]),
    ]
    return line_chart(series, x_labels=labels), sum(r[2] for r in rows), sum(r[3] for r in rows)


def create_app(config: ConsoleConfig) -> Starlette:
    """The console as an ASGI application on ``config.store``."""
    store, settings = config.store, config.settings
    if not config.prompts:
        from scopehub.agents import discover_agents

        config.prompts = {spec.name: agent_prompt(spec) for spec in discover_agents()}
    tokenizer = config.tokenizer or get_tokenizer()
    templates = _templates(config)
    zone = ZoneInfo(settings.timezone)

    def page(request: Request, name: str, status_code: int = 200, **context: Any) -> HTMLResponse:
        return templates.TemplateResponse(request, name, context, status_code=status_code)

    def require_writes(request: Request) -> None:
        if not config.allow_writes:
            raise HTTPException(403, "The console is read-only: start it with --allow-writes to change anything.")

    async def checked_form(request: Request) -> dict[str, str]:
        """The form of a write action after its CSRF token (bound to the action's path) is checked."""
        require_writes(request)
        origin = request.headers.get("origin")
        if origin and origin != "null" and origin.rstrip("/") != f"{request.url.scheme}://{request.url.netloc}":
            raise HTTPException(403, "cross-site request refused")
        form = await request.form()
        sent = str(form.get("csrf", ""))
        if not secrets.compare_digest(sent, csrf_token(config.secret, request.url.path)):
            raise HTTPException(403, "the form is stale or forged (CSRF token mismatch): reload the page and try again")
        return {k: str(v) for k, v in form.items()}

    # -- pages ------------------------------------------------------------------------
    def scopes_page(request: Request) -> Response:
        after = request.query_params.get("after", "")
        names = queries.scopes_after(store, after, SCOPES_PER_PAGE + 1)
        more = len(names) > SCOPES_PER_PAGE
        waiting: dict[str, int] = {}
        root = maildir_root(settings)
        if root.exists():
            from scopehub.hub.transports.maildir.status import backlog as maildir_backlog

            for box in maildir_backlog(root, outbox=False):
                if box.scope is not None:
                    waiting[box.scope] = waiting.get(box.scope, 0) + box.waiting
        rows = []
        for scope in names[:SCOPES_PER_PAGE]:
            latest = store.latest(scope)
            rows.append(
                {
                    "scope": scope,
                    "usage": store.usage(scope),
                    "last": latest.ts if latest else None,
                    "reminders": len(list_reminders(store, scope, limit=1000)),  # active ones
                    "waiting": waiting.get(scope, 0),
                }
            )
        return page(
            request,
            "scopes.html",
            rows=rows,
            next_after=names[SCOPES_PER_PAGE - 1] if more else None,
            after=after,
            totals=queries.overall_totals(store),
            done=DONE.get(request.query_params.get("done", "")),
        )

    def timeline_page(request: Request) -> Response:
        scope = _scope_of(request, store)
        size = _int_param(request, "n", PAGE_SIZE, low=1, high=MAX_PAGE_SIZE) or PAGE_SIZE
        before = _int_param(request, "before", None, low=1, high=MAX_ID)
        # Keyset pagination: the page is the `size` messages with id < before, from the index.
        messages = store.window(scope, size, up_to=None if before is None else before - 1)
        calls: dict[int, list[dict[str, Any]]] = {}
        if messages:
            for call in queries.calls_between(store, scope, messages[0].id, messages[-1].id):
                calls.setdefault(call["message_id"], []).append(call)
        older = messages[0].id if len(messages) == size else None
        newer: int | str | None = None
        if messages and before is not None:
            following = store.messages(scope, after=messages[-1].id, limit=size)
            newer = (following[-1].id + 1 if len(following) == size else "latest") if following else None
        bars = {
            call["id"]: stacked_bar([("", {k: int(call[k] or 0) for k in SECTION_COLOURS})], width=420, bar_height=12, legend=False, css_class="mini-bar")
            for group in calls.values()
            for call in group
            if call["via"] not in ("router", "extractor")
        }
        return page(
            request,
            "timeline.html",
            scope=scope,
            # The scope's totals are on the scopes list and the charts: summing every call
            # of a long scope here would cost more than the page itself.
            count=store.count_messages(scope),
            messages=list(reversed(messages)),
            calls=calls,
            bars=bars,
            older=older,
            newer=newer,
            size=size,
        )

    def call_page(request: Request) -> Response:
        scope = _scope_of(request, store)
        call = queries.call_of(store, scope, _path_id(request, "call_id"))
        if call is None:
            raise HTTPException(404, f"no call #{request.path_params['call_id']} in {scope}")
        view = call_view(store, settings, call, config.prompts, tokenizer)
        # The answer is stored right after its message: look a few messages ahead for it.
        reply = next(
            (m for m in store.messages(scope, after=call["message_id"] or 0, limit=20) if m.role == "agent" and m.reply_to == call["message_id"]),
            None,
        ) if call.get("message_id") else None
        bar = stacked_bar([("sent", view.tokens), ("full history", view.full_history_parts)]) if view.sections or call["total"] else None
        return page(request, "call.html", scope=scope, call=call, view=view, bar=bar, reply=reply)

    def charts_page(request: Request) -> Response:
        scope = _scope_of(request, store) if "scope" in request.path_params else None
        chart, sent, full = _token_chart(store, scope, zone)
        return page(
            request,
            "charts.html",
            scope=scope,
            tokens_chart=chart,
            routes_chart=bar_chart(queries.route_counts(store, scope)),
            sent=sent,
            full=full,
        )

    def memory_page(request: Request) -> Response:
        scope = _scope_of(request, store)
        facts = fact_history(store, scope)
        root = maildir_root(settings)
        backlog: list[Any] = []
        if root.exists():
            from scopehub.hub.transports.maildir.status import backlog as maildir_backlog

            backlog = [row for row in maildir_backlog(root, outbox=False) if row.scope == scope]
        memories = [agent_memory(store, scope, name) for name in sorted(config.prompts)]
        channels = {name: read_channel(store, scope, name, limit=10) for name in sorted(channel_stats(store, scope))}
        events = recent_events(store, scope, limit=50)
        return page(
            request,
            "memory.html",
            scope=scope,
            current=[f for f in facts if f.invalid_at is None],
            older=[f for f in facts if f.invalid_at is not None],
            tasks=list_tasks(store, scope, include_done=True, limit=200),
            reminders=list_reminders(store, scope, include_inactive=True, limit=200),
            events=[(e, summarize_event(e)) for e in reversed(events)],
            claims=active_claims(store, scope),
            channels=channels,
            memories=[m for m in memories if m.lessons or m.strengths or m.weaknesses or m.goals or m.plans],
            digest=get_digest(store, scope),
            digest_usage=digest_usage(store, scope),
            knowledge=list_knowledge(store, scope, limit=200),
            backlog=backlog,
            maildir=str(root) if root.exists() else None,
            done=DONE.get(request.query_params.get("done", "")),
        )

    def erase_form(request: Request) -> Response:
        require_writes(request)
        scope = _scope_of(request, store)
        return page(request, "erase.html", scope=scope, usage=store.usage(scope), mismatch=False)

    # -- write actions (POST, CSRF token, --allow-writes) -----------------------------------
    async def forget_fact(request: Request) -> Response:
        await checked_form(request)

        def work() -> str:
            from scopehub.hub.facts import forget

            scope = _scope_of(request, store)
            gone = forget(store, scope, f"#{_path_id(request, 'fact_id')}")  # type: ignore[arg-type]
            return scope_url(scope, "memory") + "?done=" + ("fact-forgotten" if gone else "fact-missing")

        return RedirectResponse(await run_in_threadpool(work), status_code=303)

    async def cancel(request: Request) -> Response:
        await checked_form(request)

        def work() -> str:
            scope = _scope_of(request, store)
            number = _path_id(request, "number")
            with store.transaction():  # the reminder and its event: both or neither, as the tool does it
                reminder = cancel_reminder(store, scope, number)  # type: ignore[arg-type]
                if reminder is not None:
                    emit_event(store, scope, OPERATOR, "reminder.cancelled", {"reminder_id": reminder.id, "text": reminder.text})  # type: ignore[arg-type]
            return scope_url(scope, "memory") + "?done=" + ("reminder-cancelled" if reminder is not None else "reminder-missing")

        return RedirectResponse(await run_in_threadpool(work), status_code=303)

    async def erase(request: Request) -> Response:
        form = await checked_form(request)

        def work() -> Response:
            from scopehub.hub.erasure import erase_scope_everywhere

            scope = _scope_of(request, store)
            if form.get("confirm", "").strip() != scope:
                return page(request, "erase.html", status_code=400, scope=scope, usage=store.usage(scope), mismatch=True)
            erase_scope_everywhere(store, settings, scope)  # the store and the Maildir files, like /forget all
            return RedirectResponse("/?done=scope-erased", status_code=303)

        return await run_in_threadpool(work)

    async def on_http_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        return page(request, "error.html", status_code=exc.status_code, status=exc.status_code, detail=exc.detail)

    routes = [
        Route("/", scopes_page),
        Route("/charts", charts_page),
        Route("/scopes/{scope}", timeline_page),
        Route("/scopes/{scope}/calls/{call_id:int}", call_page),
        Route("/scopes/{scope}/charts", charts_page),
        Route("/scopes/{scope}/memory", memory_page),
        Route("/scopes/{scope}/erase", erase_form, methods=["GET"]),
        Route("/scopes/{scope}/erase", erase, methods=["POST"]),
        Route("/scopes/{scope}/facts/{fact_id:int}/forget", forget_fact, methods=["POST"]),
        Route("/scopes/{scope}/reminders/{number:int}/cancel", cancel, methods=["POST"]),
        Mount("/static", StaticFiles(directory=os.fspath(HERE / "static")), name="static"),
    ]
    return Starlette(
        routes=routes,
        middleware=[Middleware(AccessGuard, token=settings.console_token)],
        exception_handlers={HTTPException: on_http_error},
    )
