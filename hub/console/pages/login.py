"""Logging in with the console's token (a form: the token never goes into a URL) and out.

A login opens a session (a signed cookie with an expiry, see :mod:`..session`); wrong
tokens are braked; ``next`` only ever leads to a path of this console.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from scopehub.hub.console.access import COOKIE, braked, client_of
from scopehub.hub.console.web import Console

__all__ = ["routes"]


def _local(target: str) -> str:
    """``target`` if it is a path of this console, else ``/`` (no open redirect)."""
    return target if target.startswith("/") and not target.startswith(("//", "/\\")) else "/"


def routes(console: Console) -> list[Route]:
    gate = console.gate

    def login_form(request: Request) -> Response:
        return console.page(
            request, "login.html", next=_local(request.query_params.get("next", "/")), wrong=False, done=console.notice(request)
        )

    async def login(request: Request) -> Response:
        form = await request.form()
        target = _local(str(form.get("next", "/")))
        if not gate.token:
            return RedirectResponse(target, status_code=303)  # no token: nothing to log in to
        verdict = gate.attempt(client_of(request), str(form.get("token", "")))
        if verdict is True:
            response = RedirectResponse(target, status_code=303)
            gate.session_cookie(response, request)
            return response
        if verdict:
            return braked(verdict)
        return console.page(request, "login.html", 401, next=target, wrong=True, done=None)

    async def logout(request: Request) -> Response:
        sid = console.session_of(request)
        await console.check_logout(request)
        if sid:
            gate.sessions.close(sid)
        response = RedirectResponse(console.done_url(request, "/login", "logged-out"), status_code=303)
        response.delete_cookie(COOKIE, path="/")
        return response

    return [
        Route("/login", login_form, methods=["GET"]),
        Route("/login", login, methods=["POST"]),
        Route("/logout", logout, methods=["POST"]),
    ]
