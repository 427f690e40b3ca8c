"""Persistent facts: the block every agent call gets, ``/remember`` ``/facts`` ``/forget``,
and learning from what people say after the reply is sent.

:mod:`.keys` reads keys from English wording and pre-filters messages (zero tokens);
:mod:`.extraction` asks the model; :mod:`.reconcile` decides ADD, UPDATE, INVALIDATE or
NOOP; :mod:`.block` renders the block; :mod:`.commands` serves the chat commands;
:mod:`.service` wires it into the hub as :class:`FactKeeper`.
"""

from scopehub.hub.facts.block import BLOCK_HEADER, render_block
from scopehub.hub.facts.commands import current, forget, remember
from scopehub.hub.facts.extraction import Candidate, parse_extraction
from scopehub.hub.facts.keys import (
    infer_key,
    is_explicit,
    kind_of_key,
    looks_factual,
    normalise_key,
)
from scopehub.hub.facts.reconcile import Decision, Op, learn, reconcile
from scopehub.hub.facts.service import FactKeeper
from scopehub.hub.facts.text import MAX_FACT_CHARS, quote

__all__ = [
    "BLOCK_HEADER",
    "MAX_FACT_CHARS",
    "Candidate",
    "Decision",
    "FactKeeper",
    "Op",
    "current",
    "forget",
    "infer_key",
    "is_explicit",
    "kind_of_key",
    "learn",
    "looks_factual",
    "normalise_key",
    "parse_extraction",
    "quote",
    "reconcile",
    "remember",
    "render_block",
]
