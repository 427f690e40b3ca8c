"""The facts block every agent call gets: quoted data under a header that says so, within a
token budget.
"""

from __future__ import annotations

from collections.abc import Sequence

from scopehub.hub.context.tokens import Tokenizer
from scopehub.hub.facts.text import BLOCK_HEADER, quote
from scopehub.memory import (
    FACT_KINDS,
    Fact,
)

# --------------------------------------------------------------------------- the block


def _compose(facts: Sequence[Fact]) -> str:
    order = {kind: index for index, kind in enumerate(FACT_KINDS)}
    grouped = sorted(facts, key=lambda fact: order.get(fact.kind, len(order)))  # stable: priority within a kind
    return "\n".join([BLOCK_HEADER, *(f"- [{fact.kind}] {quote(fact.text)}" for fact in grouped)])


def render_block(facts: Sequence[Fact], tokenizer: Tokenizer, budget: int) -> str:
    """The facts block within ``budget`` tokens: explicit before derived, newest first; kinds grouped.

    Priority is strict: facts are taken in that order until the next one does not fit. A
    fact too long for any block on its own is skipped rather than hiding all the others.
    """
    if budget <= 0 or not facts:
        return ""
    ordered = sorted(facts, key=lambda fact: (fact.confidence != "explicit", -fact.valid_from, -fact.id))
    if tokenizer.count(BLOCK_HEADER) >= budget:
        return ""
    chosen: list[Fact] = []
    for fact in ordered:
        trial = [*chosen, fact]
        if tokenizer.count(_compose(trial)) <= budget:
            chosen = trial
        elif tokenizer.count(_compose([fact])) <= budget:
            break  # strict priority: nothing less important takes the place of a fact that would fit alone
        # else: a fact too long for any block is skipped, so it cannot hide the others
    return _compose(chosen) if chosen else ""
