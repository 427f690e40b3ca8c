"""What a call cost, from litellm's offline cost map (``LITELLM_LOCAL_MODEL_COST_MAP``).

Billed-equivalent tokens express the input bill in full-price input tokens: with
OpenAI's half-price cache reads, 1,000 tokens of which 600 were cached bill like 700.
A model the cost map does not know has cost ``None`` ("unknown", never 0); its
billed-equivalent tokens are known only when nothing was cached or written, since then
every input token is billed at the same price whatever it is.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

__all__ = ["EMBEDDED_PREFIX", "Price", "price_call"]

EMBEDDED_PREFIX = "local/"  # the names of the embedded models (hub.models.weights)

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Price:
    """One call's cost in USD and its input in billed-equivalent tokens (None: unknown)."""

    cost: float | None
    billed_tokens: float | None


def _uncached(prompt: int, cached: int, written: int) -> Price:
    return Price(cost=None, billed_tokens=float(prompt) if not cached and not written else None)


def price_call(
    model: str | None,
    prompt_tokens: int | None,
    completion_tokens: int | None,
    cached_tokens: int | None = None,
    cache_write_tokens: int | None = None,
) -> Price:
    """Cost and billed-equivalent input of one call; ``prompt_tokens`` includes cached ones."""
    prompt, completion = int(prompt_tokens or 0), int(completion_tokens or 0)
    cached, written = int(cached_tokens or 0), int(cache_write_tokens or 0)
    if prompt_tokens is None:
        return Price(cost=None, billed_tokens=None)
    if not model:
        return _uncached(prompt, cached, written)
    if model.startswith(EMBEDDED_PREFIX):
        # The embedded model runs here: it costs nothing, and litellm does not know it (its
        # look-up would only fail, after printing a "Provider List" banner).
        return Price(cost=0.0, billed_tokens=float(prompt))
    from scopehub.hub.models.litellm_model import import_litellm

    litellm = import_litellm()

    try:
        info = litellm.get_model_info(model)
        input_cost, output_cost = litellm.cost_per_token(
            model=model,
            prompt_tokens=prompt,
            completion_tokens=completion,
            cache_read_input_tokens=cached,
            cache_creation_input_tokens=written,
        )
    except Exception as exc:  # litellm raises for models its map does not know
        log.debug("no price for %s: %s", model, exc)
        return _uncached(prompt, cached, written)
    per_token = info.get("input_cost_per_token") or 0.0
    if per_token <= 0:  # a free or unpriced model: tokens are still tokens
        return Price(cost=input_cost + output_cost, billed_tokens=_uncached(prompt, cached, written).billed_tokens)
    return Price(cost=input_cost + output_cost, billed_tokens=input_cost / per_token)
