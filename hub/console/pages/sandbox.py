"""The sandbox chat (only with ``--allow-writes``): the operator writes as the person into a
scratch scope and the whole hub answers, as in Letta's agent simulator: routing, context,
tools, the model, and the learning after the reply. Each message links to its calls.

Scratch scopes are ``user:sandbox-<hex>``, made here and only here: a real person's scope
can never be written from this page. Erase one like any scope.
"""

from __future__ import annotations

import secrets

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from scopehub.hub.console import queries
from scopehub.hub.console.pages.timeline import message_items
from scopehub.hub.console.urls import page_url
from scopehub.hub.console.web import Console

__all__ = ["SANDBOX_PREFIX", "routes"]

SANDBOX_PREFIX = "user:sandbox-"
SANDBOX_SENDER = "operator"
SHOWN = 40  # the conversation's newest messages on the page
MAX_TEXT = 4000


def routes(console: Console) -> list[Route]:
    store = console.store

    def sandboxes() -> list[str]:
        rows = store.query("SELECT scope FROM scopes WHERE scope LIKE ? ORDER BY created DESC", (SANDBOX_PREFIX + "%",))
        return [row[0] for row in rows if row[0].startswith(SANDBOX_PREFIX)]

    def sandbox_page(request: Request) -> Response:
        console.require_writes()
        scope = request.query_params.get("scope", "")
        if scope and not (scope.startswith(SANDBOX_PREFIX) and queries.scope_exists(store, scope)):
            raise HTTPException(404, f"no sandbox {scope!r}")
        messages = store.window(scope, SHOWN) if scope else []
        return console.page(
            request, "sandbox.html", scope=scope or None, items=list(reversed(message_items(store, scope, messages, bars=False))) if scope else [],
            sandboxes=sandboxes(),
        )  # fmt: skip

    async def sandbox_send(request: Request) -> Response:
        form = await console.checked_form(request, "sandbox")
        text = form.get("text", "").strip()
        scope = form.get("scope", "").strip()
        if not text:
            raise HTTPException(400, "write a message to send")
        if len(text) > MAX_TEXT:
            raise HTTPException(400, f"a sandbox message is at most {MAX_TEXT} characters")
        if scope and not (scope.startswith(SANDBOX_PREFIX) and queries.scope_exists(store, scope)):
            raise HTTPException(400, f"{scope!r} is not a sandbox of this console: only {SANDBOX_PREFIX}… scopes are written here")
        scope = scope or SANDBOX_PREFIX + secrets.token_hex(4)
        hub = console.hub()
        from scopehub.hub import Inbound

        reply = await hub.handle(Inbound(scope=scope, text=text, sender=SANDBOX_SENDER, chat=None))
        await hub.after_send(reply)  # facts, lessons, digest: the learning a real message gets
        return RedirectResponse(page_url("/sandbox", scope=scope) + "#newest", status_code=303)

    return [Route("/sandbox", sandbox_page, methods=["GET"]), Route("/sandbox", sandbox_send, methods=["POST"])]
