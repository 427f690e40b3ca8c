"""Replay a message (only with ``--allow-writes``): its context built again as the hub
would build it now (today's facts, lessons, awareness, digest and routes), side by side
with what was sent for it, section by section. Nothing is sent to a model.
"""

from __future__ import annotations

from dataclasses import dataclass

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from scopehub.hub.console import queries
from scopehub.hub.console.calls import SectionView, call_view, section_views
from scopehub.hub.console.pages.timeline import HUB_VIAS
from scopehub.hub.console.web import Console

__all__ = ["routes"]


@dataclass(frozen=True, slots=True)
class Pair:
    """One section then and now."""

    name: str
    then: SectionView | None
    now: SectionView

    @property
    def same(self) -> bool | None:
        """Whether the text is the same (None: the text sent then was not kept)."""
        if self.then is None or self.then.text is None:
            return None
        if self.name == "history":
            return [(i.message_id, i.text) for i in self.then.items] == [(i.message_id, i.text) for i in self.now.items]
        return self.then.text == self.now.text


def routes(console: Console) -> list[Route]:
    store = console.store

    def replay_page(request: Request) -> Response:
        console.require_writes()
        scope = console.scope_of(request)
        message = store.get(scope, console.path_id(request, "message_id"))
        if message is None or message.role != "user":
            raise HTTPException(404, f"no message of a person #{request.path_params['message_id']} in {scope}")
        if not message.agent or message.agent not in console.prompts:
            raise HTTPException(409, f"message #{message.id} was not routed to an installed agent: nothing to replay")
        calls = [c for c in queries.calls_of_messages(store, scope, [message.id]).get(message.id, []) if c["via"] not in HUB_VIAS]
        then = call_view(store, console.settings, calls[-1], console.prompts, console.tokenizer) if calls else None
        context = console.hub().context_for(message.agent, scope, message, message.also_sees)
        now = section_views(context.tokens, context, console.prompts[message.agent], context.meta.get("texts", {}))
        earlier = {s.name: s for s in then.sections} if then is not None else {}
        pairs = [Pair(s.name, earlier.get(s.name), s) for s in now]
        return console.page(
            request, "replay.html", scope=scope, message=message, call=calls[-1] if calls else None, then=then, pairs=pairs,
            total_now=context.tokens.get("total", 0), full_now=context.full_history_tokens,
        )  # fmt: skip

    return [Route("/scopes/{scope:scope}/messages/{message_id:int}/replay", replay_page)]
