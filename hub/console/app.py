"""The console's Starlette application: the pages' routes, the middleware and the error page.

Pages are rendered on the server (Jinja2, autoescaped: every message text is data, never
HTML) and use no JavaScript. Each page or concern is a module of :mod:`.pages`; what they
share (templates, CSRF, the scope of a URL) is :class:`~.web.Console`.
"""

from __future__ import annotations

import os

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Mount
from starlette.staticfiles import StaticFiles

from scopehub.hub.console.access import AccessGuard
from scopehub.hub.console.pages import (
    calls,
    charts,
    fix,
    login,
    memory,
    replay,
    sandbox,
    scopes,
    search,
    timeline,
)
from scopehub.hub.console.urls import RawPath, scope_url
from scopehub.hub.console.web import HERE, Console, ConsoleConfig

__all__ = ["ConsoleConfig", "create_app", "scope_url"]

PAGES = (scopes, login, charts, search, timeline, calls, memory, fix, replay, sandbox)


def create_app(config: ConsoleConfig) -> Starlette:
    """The console as an ASGI application on ``config.store``."""
    console = Console(config)
    routes: list[BaseRoute] = [route for module in PAGES for route in module.routes(console)]
    routes.append(Mount("/static", StaticFiles(directory=os.fspath(HERE / "static")), name="static"))

    async def on_http_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        return console.page(request, "error.html", status_code=exc.status_code, status=exc.status_code, detail=exc.detail)

    app = Starlette(
        routes=routes,
        # Outermost first: route on the raw path, then the token, then the pages.
        middleware=[Middleware(RawPath), Middleware(AccessGuard, gate=console.gate)],
        exception_handlers={HTTPException: on_http_error},
    )
    app.state.console = console
    return app
