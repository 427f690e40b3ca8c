"""The runtime under the embedded model: llama.cpp in-process, through ``xllamacpp``.

``xllamacpp`` ships prebuilt manylinux wheels (no compiler at install time, unlike
``llama-cpp-python``, which builds llama.cpp from source). Its ``Server`` runs
llama.cpp's own server loop in-process: :meth:`XLlamaEngine.complete` sends one raw
completion request (our prompt, under a GBNF grammar or a JSON schema) and streams it,
so a cancelled job stops at its next token. Nothing here imports ``xllamacpp`` until
the weights are loaded, so the hub and its tests run without the ``local`` extra.

One thread by default: llama.cpp's threads spin-wait between tokens, and on a busy
two-core machine two of them decoded SmolLM2 at 10-12 tokens/s where one did 48.
The server's RAM cache of prompt states keeps each tool's demonstrations evaluated
once, whatever prompt ran in between.
"""

from __future__ import annotations

import importlib.util
import logging
import sys
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from scopehub.hub.errors import ModelError, ModelNotConfigured, ModelUnavailable
from scopehub.hub.models.weights import INSTALL_HINT

__all__ = ["Completion", "Engine", "Job", "XLlamaEngine", "default_threads"]

log = logging.getLogger(__name__)

CACHE_MIB = 256  # prompt states kept in RAM (a tool's demonstrations are a few MB each)


def default_threads() -> int:
    """One: llama.cpp's threads spin-wait, and a second one slows a machine others use too."""
    return 1


@dataclass
class Job:
    """One completion: the prompt text, its constraint, and when to stop."""

    prompt: str
    max_tokens: int
    grammar: str | None = None  # GBNF text
    schema: Mapping[str, Any] | None = None  # a JSON schema, when there is no grammar
    temperature: float = 0.0
    repeat_penalty: float = 1.0
    stop: tuple[str, ...] = ()
    cancel: threading.Event = field(default_factory=threading.Event)


@dataclass(frozen=True, slots=True)
class Completion:
    """What the model wrote and what it cost."""

    text: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0


class Engine(Protocol):
    """Runs one :class:`Job` to its end (blocking; the adapter calls it from a thread)."""

    def load(self) -> None: ...

    def complete(self, job: Job) -> Completion: ...


class XLlamaEngine:
    """llama.cpp's server loop in-process (``xllamacpp.Server``), one request at a time."""

    def __init__(self, model_path: str | Path, *, n_ctx: int = 4096, n_threads: int | None = None, cache_mib: int = CACHE_MIB) -> None:
        self.model_path = Path(model_path)
        self.n_ctx = n_ctx
        self.n_threads = n_threads or default_threads()
        self.cache_mib = cache_mib
        self.load_seconds: float | None = None
        self._server: Any = None

    @staticmethod
    def available() -> str | None:
        """Why the runtime cannot run here, or None when it can."""
        try:
            # A None in sys.modules is how an absent package is simulated (and blocked).
            spec = None if "xllamacpp" in sys.modules and sys.modules["xllamacpp"] is None else importlib.util.find_spec("xllamacpp")
        except (ImportError, ValueError):
            spec = None
        if spec is None:
            return f"xllamacpp is not installed: {INSTALL_HINT}"
        return None

    def load(self) -> None:
        """Load the weights (a second or two); later calls do nothing."""
        if self._server is not None:
            return
        problem = self.available()
        if problem:
            raise ModelNotConfigured(problem)
        try:
            import xllamacpp
        except Exception as exc:  # a broken native wheel raises OSError, not only ImportError
            raise ModelNotConfigured(f"xllamacpp is installed but cannot load ({exc}); reinstall: {INSTALL_HINT}") from exc
        params = xllamacpp.CommonParams()
        params.model.path = str(self.model_path)
        params.n_ctx = self.n_ctx
        params.n_parallel = 1  # one slot: calls are serialised by the adapter anyway
        params.cpuparams.n_threads = self.n_threads
        params.cpuparams_batch.n_threads = self.n_threads
        params.cache_ram_mib = self.cache_mib
        params.warmup = False  # the first real prompt warms it
        params.verbosity = -1  # llama.cpp's per-request log lines would fill standard error
        # AMX and weight-repacking buffers crashed llama.cpp on some servers (segfault in
        # ggml_backend_amx_mul_mat); a model this small loses nothing without them.
        params.no_extra_bufts = True
        log.info("loading %s (%d thread(s))", self.model_path, self.n_threads)
        started = time.perf_counter()
        try:
            self._server = xllamacpp.Server(params)
        except Exception as exc:
            raise ModelError(f"cannot load the local model {self.model_path}: {exc}") from exc
        self.load_seconds = time.perf_counter() - started

    def complete(self, job: Job) -> Completion:
        self.load()
        request: dict[str, Any] = {
            "prompt": job.prompt,
            "n_predict": job.max_tokens,
            "temperature": job.temperature,
            "repeat_penalty": job.repeat_penalty,
            "stop": list(job.stop),
            "cache_prompt": True,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if job.grammar is not None:
            request["grammar"] = job.grammar
        elif job.schema is not None:
            request["json_schema"] = dict(job.schema)
        pieces: list[str] = []
        usage: dict[str, Any] = {}
        errors: list[Any] = []

        def on_chunk(chunk: Any) -> bool:
            """Keep the text; returning True stops llama.cpp at this token."""
            if isinstance(chunk, Mapping):
                if "error" in chunk:
                    errors.append(chunk["error"])
                    return True
                for choice in chunk.get("choices") or ():
                    pieces.append(choice.get("text") or "")
                usage.update(chunk.get("usage") or {})
            return job.cancel.is_set()

        try:
            result = self._server.handle_completions(request, on_chunk)
        except Exception as exc:
            raise ModelError(f"local model failed: {type(exc).__name__}: {exc}") from exc
        if isinstance(result, Mapping) and "error" in result:
            errors.append(result["error"])
        if errors:
            error = errors[0]
            message = error.get("message") if isinstance(error, Mapping) else str(error)
            raise ModelError(f"local model refused the request: {message}")
        if job.cancel.is_set():
            raise ModelUnavailable("local model call cancelled")
        details = usage.get("prompt_tokens_details") or {}
        return Completion(
            text="".join(pieces),
            prompt_tokens=int(usage.get("prompt_tokens") or 0),
            completion_tokens=int(usage.get("completion_tokens") or 0),
            cached_tokens=int(details.get("cached_tokens") or 0),
        )
