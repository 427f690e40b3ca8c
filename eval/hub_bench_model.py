"""The fake model ``bench hub`` and its start-up part answer from: every call at once.

Apart from both so that ``hub_bench`` and ``hub_bench_start`` can share it without
importing each other.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

__all__ = ["respond"]

_SHOWN_ID = re.compile(r"#(\d+)")


def respond(openai_server: Any) -> Callable[[dict[str, Any]], Any]:
    """The fake model: each hub call gets the answer it asks for, at once."""

    def answer(request: dict[str, Any]) -> Any:
        messages = request.get("messages") or []
        system = str(messages[0].get("content") or "") if messages else ""
        if system.startswith("You extract lasting facts"):
            return openai_server.text('{"facts": []}')
        if system.startswith(("You keep the digest", "You write the digest")):
            # One plain line from the first message shown: a digest the compaction keeps.
            shown = _SHOWN_ID.search(" ".join(str(m.get("content") or "") for m in messages[1:]))
            sources = [int(shown.group(1))] if shown else []
            return openai_server.text(json.dumps({"lines": [{"text": "The person asked the team for help.", "sources": sources}]}))
        last = next((str(m.get("content") or "") for m in reversed(messages) if m.get("role") == "user"), "")
        return openai_server.text("re: " + last[-120:])

    return answer
