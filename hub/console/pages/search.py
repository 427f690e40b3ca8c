"""Search a scope: its messages (with their calls), notes, emails, drafts and knowledge,
ranked by the archive search the agents' ``search_memory`` uses (``Store.search``,
hybrid), and facts whose text holds the words. A query that is a date or a message id
also offers the jump to it on the timeline.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from scopehub.hub.console import queries
from scopehub.hub.console.dates import parse_jump
from scopehub.hub.console.pages.timeline import message_items
from scopehub.hub.console.web import Console
from scopehub.memory import current_facts, get_vault_item

__all__ = ["routes"]

RESULTS = 30
MAX_QUERY_CHARS = 500


def routes(console: Console) -> list[Route]:
    store = console.store

    def search_page(request: Request) -> Response:
        scope = console.scope_of(request)
        q = request.query_params.get("q", "").strip()[:MAX_QUERY_CHARS]
        hits = store.search(scope, q, k=RESULTS, half_life_days=console.settings.search_half_life_days) if q else []
        found = {hit.id: hit for hit in hits if hit.kind == "message"}
        messages = queries.messages_by_id(store, scope, [hit.id for hit in hits if hit.kind == "message"])
        documents = [(hit, get_vault_item(store, scope, hit.id)) for hit in hits if hit.kind == "vault"]
        # Facts are a handful per scope and not in the archive index: the words, case-blind.
        words = [w for w in q.lower().split() if len(w) > 2]
        facts = [f for f in current_facts(store, scope) if words and all(w in f.text.lower() for w in words)] if q else []
        jump = parse_jump(q, console.zone) if q else None
        return console.page(
            request,
            "search.html",
            scope=scope,
            q=q,
            order=[("message", hit) if hit.kind == "message" else ("vault", hit) for hit in hits],
            items={item.message.id: item for item in message_items(store, scope, messages, bars=False)},
            found=found,
            documents={hit.id: item for hit, item in documents if item is not None},
            facts=facts,
            jump=jump,
        )

    return [Route("/scopes/{scope:scope}/search", search_page)]
