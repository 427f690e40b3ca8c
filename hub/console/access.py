"""Who may use the console: the token and sessions, loopback-only without one, the headers.

- With ``HUB_CONSOLE_TOKEN`` set (16 characters at least, else the console refuses to
  start), every request carries it (``Authorization: Bearer <token>``, for scripts) or a
  session cookie. A browser logs in on ``/login`` (or opens ``/?token=<token>`` once, and
  is redirected without it, so it stays out of the address bar and the history); the
  cookie holds a signed session id with an expiry, never the token, and ``/logout`` ends
  it. Wrong tokens are braked per client and overall (:class:`~.session.LoginBrake`).
- Without a token the console starts only on a loopback address, and answers only
  requests whose ``Host`` is a loopback name: a web page that rebinds its own DNS name to
  127.0.0.1 (DNS rebinding) gets nothing.
- Every response forbids scripts, framing and caching (the pages use no JavaScript).
"""

from __future__ import annotations

import hmac
import ipaddress
from dataclasses import dataclass
from urllib.parse import quote, urlencode

from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from scopehub.hub.console.session import LoginBrake, Sessions

__all__ = ["COOKIE", "MIN_TOKEN_CHARS", "AccessGuard", "ConsoleRefused", "Gate", "check_listen", "check_token", "is_loopback"]

COOKIE = "hub_console"
MIN_TOKEN_CHARS = 16
PUBLIC_PREFIXES = ("/static/", "/login")  # the stylesheet and the login form need no session
_LOOPBACK_NAMES = {"localhost", "localhost.", "ip6-localhost"}
SECURITY_HEADERS = {
    # No script may run at all; styles only from the console's own stylesheet.
    "content-security-policy": "default-src 'none'; style-src 'self'; img-src 'self' data:; form-action 'self';"
    " frame-ancestors 'none'; base-uri 'none'",
    "x-content-type-options": "nosniff",
    "x-frame-options": "DENY",
    "referrer-policy": "no-referrer",
    "cache-control": "no-store",
}


class ConsoleRefused(Exception):
    """The console will not start with these options (the message says why and what to do)."""


def is_loopback(host: str) -> bool:
    """Whether ``host`` (an address or a name, IPv6 in brackets or not) is this machine only."""
    name = host.strip().lower()
    if name.startswith("[") and name.endswith("]"):
        name = name[1:-1]
    if name in _LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def check_token(token: str) -> None:
    """Refuse a token too short to resist guessing (on any address: loopback is shared too)."""
    if token and len(token) < MIN_TOKEN_CHARS:
        raise ConsoleRefused(
            f"HUB_CONSOLE_TOKEN is {len(token)} characters: use at least {MIN_TOKEN_CHARS}"
            " (a long random secret, e.g. python -c 'import secrets; print(secrets.token_urlsafe(32))')"
        )


def check_listen(listen: str, token: str) -> None:
    """Refuse a short token, and a non-loopback address without a token: the console shows every chat's messages."""
    check_token(token)
    if not token and not is_loopback(listen):
        raise ConsoleRefused(
            f"refusing to listen on {listen}: without HUB_CONSOLE_TOKEN the console serves loopback only"
            " (127.0.0.1, ::1). Set HUB_CONSOLE_TOKEN to a long random secret to serve other addresses."
        )


def _host_name(host_header: str) -> str:
    """The name of a Host header without its port (``[::1]:8765`` -> ``[::1]``)."""
    if host_header.startswith("["):
        return host_header.split("]", 1)[0] + "]"
    return host_header.rsplit(":", 1)[0] if host_header.count(":") == 1 else host_header


@dataclass
class Gate:
    """The token, the live sessions and the brake on wrong tokens: what a login checks."""

    token: str
    sessions: Sessions
    brake: LoginBrake

    def matches(self, offered: str | None) -> bool:
        return offered is not None and bool(self.token) and hmac.compare_digest(offered.encode("utf-8"), self.token.encode("utf-8"))

    def attempt(self, client: str, offered: str | None) -> bool | float:
        """True for the right token; else the wrong one is counted and False returned, or,
        while braked, the seconds to wait (the token is not even compared then)."""
        wait = self.brake.wait(client)
        if wait > 0:
            return wait
        if self.matches(offered):
            return True
        self.brake.failed(client)
        return False

    def session_cookie(self, response: Response, request: Request) -> None:
        """Open a session and set its cookie on ``response``."""
        response.set_cookie(
            COOKIE,
            self.sessions.open(),
            max_age=int(self.sessions.lifetime_s),
            httponly=True,
            samesite="strict",
            secure=request.url.scheme == "https",
            path="/",
        )


def client_of(request: Request) -> str:
    return request.client.host if request.client else "?"


def braked(wait: float) -> Response:
    return PlainTextResponse(
        f"Too many wrong tokens: try again in {wait:.0f} s.", status_code=429, headers={"retry-after": str(max(1, round(wait)))}
    )


class AccessGuard:
    """ASGI middleware: the token or a session (or loopback-only), and the security headers on every response.

    A request let through carries ``scope["state"]["session"]``: its session id ("" for
    a Bearer header or a console without a token), which CSRF tokens are bound to.
    """

    def __init__(self, app: ASGIApp, *, gate: Gate) -> None:
        self.app = app
        self.gate = gate

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request = Request(scope)

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                present = {name.lower() for name, _ in headers}
                headers += [(k.encode(), v.encode()) for k, v in SECURITY_HEADERS.items() if k.encode() not in present]
                message = {**message, "headers": headers}
            await send(message)

        response, session = self._admit(request)
        if response is not None:
            await response(scope, receive, send_with_headers)
            return
        scope.setdefault("state", {})["session"] = session
        await self.app(scope, receive, send_with_headers)

    def _admit(self, request: Request) -> tuple[Response | None, str]:
        """(the response that stops this request, or None to let it through; its session id)."""
        if not self.gate.token:
            if not is_loopback(_host_name(request.headers.get("host", ""))):
                return PlainTextResponse(
                    "This console has no HUB_CONSOLE_TOKEN and answers only to http://127.0.0.1 or http://localhost.",
                    status_code=403,
                ), ""
            return None, ""
        header = request.headers.get("authorization", "")
        if header[:7].lower() == "bearer ":
            verdict = self.gate.attempt(client_of(request), header[7:].strip())
            if verdict is True:
                return None, ""
            return (braked(verdict) if verdict else self._unauthorised(request)), ""
        offered = request.query_params.get("token")
        if offered is not None:
            verdict = self.gate.attempt(client_of(request), offered)
            if verdict is not True:
                return (braked(verdict) if verdict else self._unauthorised(request)), ""
            # Trade the token in the URL for a session, and drop it from the address.
            rest = [(k, v) for k, v in request.query_params.multi_items() if k != "token"]
            response = RedirectResponse(request.url.path + ("?" + urlencode(rest) if rest else ""), status_code=303)
            self.gate.session_cookie(response, request)
            return response, ""
        session = self.gate.sessions.check(request.cookies.get(COOKIE))
        if session is not None:
            return None, session
        if request.url.path.startswith(PUBLIC_PREFIXES):
            return None, ""
        return self._unauthorised(request), ""

    def _unauthorised(self, request: Request) -> Response:
        if request.method == "GET" and "text/html" in request.headers.get("accept", ""):
            target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
            return RedirectResponse("/login?next=" + quote(target, safe=""), status_code=303)
        return PlainTextResponse(
            "This console needs its token: send 'Authorization: Bearer <HUB_CONSOLE_TOKEN>', or log in at /login.",
            status_code=401,
            headers={"www-authenticate": 'Bearer realm="agents-hub console"'},
        )
