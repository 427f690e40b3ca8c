"""Builders the dataset loader tests share: a JSON file written plain or gzipped, a turn's slots."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

from scopehub.eval.loaders import Turn


def write_json(directory: Path, name: str, data: Any, gz: bool) -> Path:
    """Write ``data`` as ``name`` (plain) or ``name.gz`` (gzip); return the path."""
    directory.mkdir(parents=True, exist_ok=True)
    text = json.dumps(data)
    if gz:
        path = directory / f"{name}.gz"
        with gzip.open(path, "wt", encoding="utf-8") as handle:
            handle.write(text)
        return path
    path = directory / name
    path.write_text(text, encoding="utf-8")
    return path


def slots_of(turn: Turn) -> set[tuple[str, str, str]]:
    return {(s.domain, s.name, s.value) for s in turn.slots}
