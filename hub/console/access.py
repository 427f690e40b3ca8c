"""Who may use the console: the token, loopback-only without one, CSRF for write forms.

- With ``HUB_CONSOLE_TOKEN`` set, every request carries it: ``Authorization: Bearer
  <token>``, or the HttpOnly cookie that a first ``?token=<token>`` sets (that request is
  redirected to the same URL without the token, so it does not stay in the address bar
  or the history).
- Without a token the console starts only on a loopback address, and answers only
  requests whose ``Host`` is a loopback name: a web page that rebinds its own DNS name to
  127.0.0.1 (DNS rebinding) gets nothing.
- Every response forbids scripts, framing and caching (the pages use no JavaScript).
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
from urllib.parse import urlencode

from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["COOKIE", "AccessGuard", "ConsoleRefused", "check_listen", "csrf_token", "is_loopback"]

COOKIE = "hub_console"
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


def check_listen(listen: str, token: str) -> None:
    """Refuse a non-loopback address without a token: the console shows every chat's messages."""
    if not token and not is_loopback(listen):
        raise ConsoleRefused(
            f"refusing to listen on {listen}: without HUB_CONSOLE_TOKEN the console serves loopback only"
            " (127.0.0.1, ::1). Set HUB_CONSOLE_TOKEN to a long random secret to serve other addresses."
        )


def csrf_token(secret: bytes, path: str) -> str:
    """The token a write form to ``path`` must carry: bound to this process and to the action."""
    return hmac.new(secret, path.encode("utf-8"), hashlib.sha256).hexdigest()


def _host_name(host_header: str) -> str:
    """The name of a Host header without its port (``[::1]:8765`` -> ``[::1]``)."""
    if host_header.startswith("["):
        return host_header.split("]", 1)[0] + "]"
    return host_header.rsplit(":", 1)[0] if host_header.count(":") == 1 else host_header


class AccessGuard:
    """ASGI middleware: the token (or loopback-only), and the security headers on every response."""

    def __init__(self, app: ASGIApp, *, token: str) -> None:
        self.app = app
        self.token = token

    def _supplied(self, request: Request) -> str | None:
        header = request.headers.get("authorization", "")
        if header[:7].lower() == "bearer ":
            return header[7:].strip()
        return request.cookies.get(COOKIE)

    def _matches(self, value: str | None) -> bool:
        return value is not None and hmac.compare_digest(value.encode("utf-8"), self.token.encode("utf-8"))

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

        response = self._refusal(request)
        if response is not None:
            await response(scope, receive, send_with_headers)
            return
        await self.app(scope, receive, send_with_headers)

    def _refusal(self, request: Request) -> Response | None:
        """The response that stops this request, or None to let it through."""
        if not self.token:
            if not is_loopback(_host_name(request.headers.get("host", ""))):
                return PlainTextResponse(
                    "This console has no HUB_CONSOLE_TOKEN and answers only to http://127.0.0.1 or http://localhost.",
                    status_code=403,
                )
            return None
        offered = request.query_params.get("token")
        if offered is not None and self._matches(offered):
            # Trade the token in the URL for a cookie, and drop it from the address.
            rest = [(k, v) for k, v in request.query_params.multi_items() if k != "token"]
            target = request.url.path + ("?" + urlencode(rest) if rest else "")
            response = RedirectResponse(target, status_code=303)
            response.set_cookie(
                COOKIE, self.token, httponly=True, samesite="strict", secure=request.url.scheme == "https", path="/"
            )
            return response
        if self._matches(self._supplied(request)):
            return None
        return PlainTextResponse(
            "This console needs its token: send 'Authorization: Bearer <HUB_CONSOLE_TOKEN>',"
            " or open it once as /?token=<HUB_CONSOLE_TOKEN> (a cookie keeps it).",
            status_code=401,
            headers={"www-authenticate": 'Bearer realm="agents-hub console"'},
        )
