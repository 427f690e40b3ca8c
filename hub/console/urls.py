"""Console URLs: a scope id is one path segment, percent-encoded, whatever it holds.

Scope ids are free text after ``user:`` / ``group:`` (``user:a/b``, ``user:100%``,
``group:"x"``). A server decodes the path before routing, so ``%2F`` would become a
separator and the scope's pages would 404. :class:`RawPath` rebuilds the routed path
from the raw one, decoding every segment except its ``/`` and ``%`` (kept as ``%2F`` and
``%25``), and the ``scope`` convertor decodes those last two: one segment in, the exact
id out. Links are made by :func:`scope_url`, which encodes the same way.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote, unquote, urlencode

from starlette.convertors import Convertor, register_url_convertor
from starlette.types import ASGIApp, Receive, Scope, Send

__all__ = ["RawPath", "ScopeConvertor", "page_url", "scope_url"]


def _segment(part: object) -> str:
    # Everything but the unreserved characters and ':' is encoded: '/', '%', quotes, spaces.
    return quote(str(part), safe=":")


def scope_url(scope: str, *rest: object, **query: Any) -> str:
    """The console path of a scope's page (``/scopes/user:42/memory``), every part encoded.

    Keyword arguments become the query string; None and "" are left out.
    """
    path = "/scopes/" + _segment(scope) + "".join(f"/{_segment(part)}" for part in rest)
    return page_url(path, **query)


def page_url(path: str, **query: Any) -> str:
    """``path`` with the query string of the keyword arguments that have a value."""
    kept = {name: value for name, value in query.items() if value is not None and value is not False and value != ""}
    return path + ("?" + urlencode(kept) if kept else "")


class ScopeConvertor(Convertor[str]):
    """A scope id in one path segment (its ``/`` and ``%`` still encoded by :class:`RawPath`)."""

    regex = "[^/]+"

    def convert(self, value: str) -> str:
        return unquote(value)

    def to_string(self, value: str) -> str:
        return _segment(value)


register_url_convertor("scope", ScopeConvertor())


def _routed(raw: str) -> str:
    """The path to route: each segment decoded, except that '%' and '/' stay encoded."""
    return "/".join(unquote(seg).replace("%", "%25").replace("/", "%2F") for seg in raw.split("/"))


class RawPath:
    """ASGI middleware: route on the raw path, so an encoded ``/`` stays inside its segment."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        raw = scope.get("raw_path") if scope["type"] == "http" else None
        if raw:
            scope = {**scope, "path": _routed(raw.decode("latin-1"))}
        await self.app(scope, receive, send)
