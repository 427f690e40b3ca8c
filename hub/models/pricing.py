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
import threading
from dataclasses import dataclass
from pathlib import Path

__all__ = ["EMBEDDED_PREFIX", "UNPRICED", "Price", "price_call"]

EMBEDDED_PREFIX = "local/"  # the names of the embedded models (hub.models.weights)

log = logging.getLogger(__name__)


class _Unpriced:
    """The models litellm's offline cost map does not know, remembered on disk.

    Asking litellm means importing it (seconds of CPU: most of a start) and, for a model
    it does not know, about ten failed look-ups a call. Its answer only changes with its
    version or its cost map, which the file is keyed by; a model is remembered only while
    the offline map is in use (``LITELLM_LOCAL_MODEL_COST_MAP=True``, the hub's default):
    the online one may learn new models. ``$XDG_CACHE_HOME/scopehub/unpriced-models.json``
    (``~/.cache``), or ``HUB_PRICE_CACHE``; a file that cannot be read or written is
    only a slower start.
    """

    def __init__(self) -> None:
        self._models: set[str] | None = None
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

    def _load(self) -> set[str]:
        if self._models is None:
            self._models = set()
            key = self.key()
            if key is not None:
                with contextlib.suppress(OSError, ValueError, TypeError, AttributeError):
                    data = json.loads(self.path().read_text(encoding="utf-8"))
                    if data.get("key") == key:
                        self._models = {str(m) for m in data.get("models", [])}
        return self._models

    def __contains__(self, model: object) -> bool:
        with self._lock:
            return model in self._load()

    def add(self, model: str) -> None:
        with self._lock:
            models = self._load()
            if model in models:
                return
            models.add(model)
            key = self.key()
        if key is None:
            return
        path = self.path()
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            temporary = path.with_suffix(f".{os.getpid()}.tmp")
            temporary.write_text(json.dumps({"key": key, "models": sorted(models)}), encoding="utf-8")
            temporary.replace(path)  # atomic: another process reads the old file or the new one
        except OSError as exc:
            log.debug("unpriced models not remembered (%s)", exc)


UNPRICED = _Unpriced()


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
    if model in UNPRICED:  # litellm's map does not know it: no need to import litellm to hear so again
        return _uncached(prompt, cached, written)
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
        UNPRICED.add(model)
        return _uncached(prompt, cached, written)
    per_token = info.get("input_cost_per_token") or 0.0
    if per_token <= 0:  # a free or unpriced model: tokens are still tokens
        return Price(cost=input_cost + output_cost, billed_tokens=_uncached(prompt, cached, written).billed_tokens)
    return Price(cost=input_cost + output_cost, billed_tokens=input_cost / per_token)
