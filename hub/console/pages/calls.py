"""A call's page: an agent call's exact context section by section, its tool loop and
reply, or the router's / the extractor's prompt, answer and outcome; with its failure."""

from __future__ import annotations

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from scopehub.hub.console import queries
from scopehub.hub.console.calls import call_view
from scopehub.hub.console.charts import stacked_bar
from scopehub.hub.console.hubcalls import hub_call_view
from scopehub.hub.console.pages.timeline import HUB_VIAS
from scopehub.hub.console.toolloop import tool_rounds
from scopehub.hub.console.web import Console

__all__ = ["routes"]


def routes(console: Console) -> list[Route]:
    store = console.store

    def call_page(request: Request) -> Response:
        scope = console.scope_of(request)
        call = queries.call_of(store, scope, console.path_id(request, "call_id"))
        if call is None:
            raise HTTPException(404, f"no call #{request.path_params['call_id']} in {scope}")
        message = store.get(scope, call["message_id"]) if call.get("message_id") is not None else None
        # The message's other calls: the router's before, the agent's, the extractor's after.
        siblings = [c for c in queries.calls_of_messages(store, scope, [message.id]).get(message.id, []) if c["id"] != call["id"]] if message else []
        reply_id = queries.replies_to(store, scope, [message.id]).get(message.id) if message else None
        reply = store.get(scope, reply_id) if reply_id is not None else None
        common = {"scope": scope, "call": call, "message": message, "siblings": siblings, "reply": reply}
        if call["via"] in HUB_VIAS:
            return console.page(request, "hubcall.html", view=hub_call_view(call), **common)
        view = call_view(store, console.settings, call, console.prompts, console.tokenizer)
        bar = stacked_bar([("sent", view.tokens), ("full history", view.full_history_parts)]) if view.sections or call["total"] else None
        rounds, rounds_kept = tool_rounds(call["extra"])
        return console.page(request, "call.html", view=view, bar=bar, rounds=rounds, rounds_kept=rounds_kept, **common)

    return [Route("/scopes/{scope:scope}/calls/{call_id:int}", call_page)]
