"""What a call cost, from litellm's offline cost map (``LITELLM_LOCAL_MODEL_COST_MAP``).

Billed-equivalent tokens express the input bill in full-price input tokens: with
OpenAI's half-price cache reads, 1,000 tokens of which 600 were cached bill like 700.
A model the cost map does not know has cost ``None`` ("unknown", never 0); its
billed-equivalent tokens are known only when nothing was cached or written, since then
every input token is billed at the same price whatever it is.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import importlib.util
import json
import logging
import os
import re
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

__all__ = ["COST_MAP_MEMO", "EMBEDDED_PREFIX", "Price", "price_call"]

EMBEDDED_PREFIX = "local/"  # the names of the embedded models (hub.models.weights)

log = logging.getLogger(__name__)


KEPT_COST_MAPS = 4  # litellm versions remembered side by side (installs or checkouts on one machine)


class _CostMapMemo:
    """What litellm's offline cost map said about each model, remembered on disk.

    Asking litellm means importing it (seconds of CPU: most of a start, paid by the first
    reply) and, for a model it does not know, about ten failed look-ups a call. Its
    answer only changes with its version or its cost map, which the file is keyed by; a
    model is remembered only while the offline map is in use
    (``LITELLM_LOCAL_MODEL_COST_MAP=True``, the hub's default): the online one may learn
    new models. Two things are remembered:

    - the models the map does not know (``in``, ``add``);
    - a priced model's rate card (``rates``, ``add_rates``): its four per-token rates,
      kept only when litellm's own prices for sample calls are exactly those rates times
      the tokens, below the first token tier.

    ``$XDG_CACHE_HOME/scopehub/unpriced-models.json`` (``~/.cache``), or
    ``HUB_PRICE_CACHE``, with an entry for each of the last few cost maps (one per litellm
    install); a file that cannot be read or written is only a slower start.
    """

    def __init__(self) -> None:
        self._models: set[str] | None = None
        self._rates: dict[str, RateCard] = {}
        self._lock = threading.Lock()

    @staticmethod
    def path() -> Path:
        configured = os.environ.get("HUB_PRICE_CACHE")
        if configured:
            return Path(configured)
        base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
        return base / "scopehub" / "unpriced-models.json"

    @staticmethod
    def key() -> str | None:
        """litellm's version and its offline cost map's size and time; None when prices may come from the network."""
        if os.environ.get("LITELLM_LOCAL_MODEL_COST_MAP", "").lower() != "true":
            return None
        try:
            spec = importlib.util.find_spec("litellm")
            if spec is None or spec.origin is None:
                return None
            prices = Path(spec.origin).parent / "model_prices_and_context_window_backup.json"
            stat = prices.stat()
            return f"{importlib.metadata.version('litellm')}:{stat.st_size}:{int(stat.st_mtime)}"
        except (OSError, ImportError, ValueError, importlib.metadata.PackageNotFoundError):
            return None

    def _versions(self) -> dict[str, Any]:
        """The file's entries, one per cost map (several installs or checkouts share the file)."""
        with contextlib.suppress(OSError, ValueError, TypeError, AttributeError):
            data = json.loads(self.path().read_text(encoding="utf-8"))
            if "key" in data:  # the file of one cost map, as written before versions were kept
                return {str(data["key"]): data}
            return {str(key): entry for key, entry in data["versions"].items() if isinstance(entry, dict)}
        return {}

    def _load(self) -> set[str]:
        if self._models is None:
            self._models = set()
            key = self.key()
            if key is not None:
                with contextlib.suppress(ValueError, TypeError, IndexError, AttributeError):
                    entry = self._versions().get(key) or {}
                    self._models = {str(m) for m in entry.get("models", [])}
                    self._rates = {
                        str(model): RateCard(*(float(value) for value in card[:5]), int(card[5]))
                        for model, card in (entry.get("rates") or {}).items()
                    }
        return self._models

    def __contains__(self, model: object) -> bool:
        with self._lock:
            return model in self._load()

    def rates(self, model: str) -> RateCard | None:
        """The remembered rate card of ``model`` (None: ask litellm)."""
        with self._lock:
            self._load()
            return self._rates.get(model)

    def add(self, model: str) -> None:
        """Remember that litellm's map does not know ``model``."""
        with self._lock:
            models = self._load()
            if model in models:
                return
            models.add(model)
            self._save()

    def add_rates(self, model: str, card: RateCard) -> None:
        """Remember ``model``'s rate card."""
        with self._lock:
            self._load()
            if self._rates.get(model) == card:
                return
            self._rates[model] = card
            self._save()

    def _save(self) -> None:
        key = self.key()
        if key is None:
            return
        path = self.path()
        versions = self._versions()
        versions.pop(key, None)  # this cost map's entry last: the most recently written
        versions[key] = {"models": sorted(self._models or ()), "rates": {model: list(card) for model, card in sorted(self._rates.items())}}
        data = {"versions": dict(list(versions.items())[-KEPT_COST_MAPS:])}
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            temporary = path.with_suffix(f".{os.getpid()}.tmp")
            temporary.write_text(json.dumps(data), encoding="utf-8")
            temporary.replace(path)  # atomic: another process reads the old file or the new one
        except OSError as exc:
            log.debug("prices not remembered (%s)", exc)


class RateCard(NamedTuple):
    """A model's per-token prices in USD, valid for prompts of fewer than ``below`` tokens."""

    input: float
    output: float
    cache_read: float
    cache_write: float
    per_input_token: float  # the map's input_cost_per_token, the unit of billed-equivalent tokens
    below: int

    def cost(self, prompt: int, completion: int, cached: int, written: int) -> tuple[float, float]:
        """(input cost, output cost), summed in litellm's order so the floats are the same."""
        return float(prompt - cached - written) * self.input + cached * self.cache_read + written * self.cache_write, completion * self.output


# Calls litellm prices to check that a model's price is its rates times the tokens:
# (prompt, completion, cached, written), odd sizes so that a different rounding shows.
_SAMPLE_CALLS = ((1234, 567, 0, 0), (98765, 4321, 50003, 0), (5003, 17, 0, 2999), (150001, 7, 1001, 999), (7, 3, 5, 1))
_TIER = re.compile(r"_above_(\d+)(k|m)_tokens")
# Prices that depend on more than the token counts: ranges of tokens, the hour of the call.
_NOT_PER_TOKEN = re.compile(r"^tiered_pricing|off_peak")


def _rate_card(litellm: Any, model: str, info: Mapping[str, Any]) -> RateCard | None:
    """``model``'s rates as litellm prices them, when its price is exactly rates times tokens; else None."""
    if any(_NOT_PER_TOKEN.search(key) for key, value in info.items() if value):
        return None
    tiers = [int(m[1]) * (1000 if m[2] == "k" else 1_000_000) for key, value in info.items() if value and (m := _TIER.search(key))]
    below = min(tiers, default=10_000_000)

    def priced(prompt: int, completion: int, cached: int, written: int) -> tuple[float, float]:
        return tuple(litellm.cost_per_token(
            model=model, prompt_tokens=prompt, completion_tokens=completion,
            cache_read_input_tokens=cached, cache_creation_input_tokens=written,
        ))  # fmt: skip

    card = RateCard(
        priced(1, 0, 0, 0)[0], priced(0, 1, 0, 0)[1], priced(1, 0, 1, 0)[0], priced(1, 0, 0, 1)[0],
        float(info.get("input_cost_per_token") or 0.0), below,
    )  # fmt: skip
    for call in _SAMPLE_CALLS:
        if call[0] < below and priced(*call) != card.cost(*call):
            return None
    return card


COST_MAP_MEMO = _CostMapMemo()  # the unpriced models and the rate cards


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
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    if model in COST_MAP_MEMO:  # litellm's map does not know it: no need to import litellm to hear so again
        return _uncached(prompt, cached, written)
    card = COST_MAP_MEMO.rates(model)
    if card is not None and prompt < card.below:
        return _priced(*card.cost(prompt, completion, cached, written), card.per_input_token, prompt, cached, written)
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
        COST_MAP_MEMO.add(model)
        return _uncached(prompt, cached, written)
    if card is None:
        try:
            learnt = _rate_card(litellm, model, info)
        except Exception as exc:  # a rate card is only a faster next start
            log.debug("no rate card for %s: %s", model, exc)
            learnt = None
        if learnt is not None:
            COST_MAP_MEMO.add_rates(model, learnt)
    return _priced(input_cost, output_cost, info.get("input_cost_per_token") or 0.0, prompt, cached, written)


def _priced(input_cost: float, output_cost: float, per_token: float, prompt: int, cached: int, written: int) -> Price:
    if per_token <= 0:  # a free or unpriced model: tokens are still tokens
        return Price(cost=input_cost + output_cost, billed_tokens=_uncached(prompt, cached, written).billed_tokens)
    return Price(cost=input_cost + output_cost, billed_tokens=input_cost / per_token)
