"""The frozen test part of the dev data: set aside before any tuning, scored once at the end.

``eval/data/frozen.json`` names a quarter of the dialogues of SGD dev and MultiWOZ val, and
a quarter of CLINC150's ``val`` and ``oos_val`` messages. Every evaluation leaves them out
(of the routed turns and of the examples alike), so settings tuned with cross-validation
on the rest never saw them; ``--frozen`` routes or replays them alone, with examples from
the rest, for the one final figure beside the folds' mean ± sd.

An item is matched by a fingerprint of its text, not by its id alone: SGD's ids
(``1_00000``) repeat in every split, and another split's dialogue must never be taken for
a frozen one. On data the file does not name (another split, your own log) nothing is
held out.

The file was written once by :func:`freeze` (``python -m scopehub.eval.holdout``) and
committed before any setting was tuned on the rest.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from .loaders import Dialogue

__all__ = [
    "FROZEN_FILE",
    "FROZEN_SHARE",
    "Holdout",
    "dialogue_fingerprint",
    "freeze",
    "load_holdout",
    "message_fingerprint",
]

FROZEN_FILE = Path(__file__).resolve().parent / "data" / "frozen.json"
FROZEN_SHARE = 0.25  # of each dataset's dev items
_SEED = "scopehub frozen test part, 2026-12"


def dialogue_fingerprint(dialogue: Dialogue) -> str:
    """A dialogue's id and every turn's text, hashed (16 hex digits)."""
    body = "\n".join([dialogue.id, *(turn.text for turn in dialogue.turns)])
    return hashlib.sha256(body.encode("utf-8")).hexdigest()[:16]


def message_fingerprint(text: str) -> str:
    """A single message's text, hashed (16 hex digits)."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


@dataclass(frozen=True)
class Holdout:
    """The frozen fingerprints of one dataset (empty: nothing is held out)."""

    dataset: str
    fingerprints: frozenset[str] = frozenset()

    def is_frozen(self, dialogue: Dialogue) -> bool:
        return bool(self.fingerprints) and dialogue_fingerprint(dialogue) in self.fingerprints

    def is_frozen_text(self, text: str) -> bool:
        return bool(self.fingerprints) and message_fingerprint(text) in self.fingerprints

    def split(self, dialogues: Sequence[Dialogue]) -> tuple[list[Dialogue], list[Dialogue]]:
        """(the rest, the frozen part), each in the given order."""
        rest: list[Dialogue] = []
        frozen: list[Dialogue] = []
        for dialogue in dialogues:
            (frozen if self.is_frozen(dialogue) else rest).append(dialogue)
        return rest, frozen

    def split_texts(self, items: Sequence[tuple[str, Any]]) -> tuple[list[tuple[str, Any]], list[tuple[str, Any]]]:
        """(the rest, the frozen part) of ``(text, label)`` items."""
        rest = [item for item in items if not self.is_frozen_text(item[0])]
        frozen = [item for item in items if self.is_frozen_text(item[0])]
        return rest, frozen


@cache
def _frozen_file(path: str) -> dict[str, Any]:
    target = Path(path)
    if not target.exists():
        return {}
    data: dict[str, Any] = json.loads(target.read_text(encoding="utf-8"))
    return data


def load_holdout(dataset: str, path: str | Path | None = None) -> Holdout:
    """The frozen part of ``dataset`` (``sgd``, ``multiwoz``, ``clinc150``) named by ``path``
    (default :data:`FROZEN_FILE`)."""
    entry = _frozen_file(str(path or FROZEN_FILE)).get(dataset) or {}
    items = entry.get("dialogues") or entry.get("messages") or []
    return Holdout(dataset, frozenset(item["fingerprint"] for item in items))


def _chosen(keys: Iterable[str], share: float) -> set[str]:
    """The ``share`` of ``keys`` that rank first by a seeded hash (order-independent)."""
    ranked = sorted(set(keys), key=lambda key: hashlib.sha256(f"{_SEED}\0{key}".encode()).hexdigest())
    return set(ranked[: round(share * len(ranked))])


def freeze(data_dir: str | Path, out: str | Path = FROZEN_FILE, *, share: float = FROZEN_SHARE) -> dict[str, Any]:
    """Choose the frozen part of ``data_dir``'s dev data and write it to ``out``."""
    from .loaders import load_clinc, load_multiwoz, load_sgd

    root = Path(data_dir)
    report: dict[str, Any] = {
        "about": (
            "The frozen test part of the dev data (eval/holdout.py): left out of every evaluation and of all tuning; "
            "`--frozen` scores it once. Items match by fingerprint (sha256 of the dialogue id and its turns' texts, "
            "or of the message), never by id alone."
        ),
        "share": share,
    }
    for name, dialogues in (("sgd", load_sgd(root / "sgd" / "dev")), ("multiwoz", load_multiwoz(root / "multiwoz21" / "val.json.gz"))):
        by_print = {dialogue_fingerprint(d): d.id for d in dialogues}
        picked = _chosen(by_print, share)
        report[name] = {
            "source": {"sgd": "sgd/dev", "multiwoz": "multiwoz21/val.json.gz"}[name],
            "of": len(dialogues),
            "dialogues": [{"id": by_print[fp], "fingerprint": fp} for fp in sorted(picked, key=lambda fp: by_print[fp])],
        }
    clinc = root / "clinc150" / "data_dev.json"
    texts = [text for split in ("val", "oos_val") for text, _ in load_clinc(clinc, split)]
    picked = _chosen((message_fingerprint(text) for text in texts), share)
    report["clinc150"] = {
        "source": "clinc150/data_dev.json: val and oos_val",
        "of": len(set(texts)),
        "messages": [{"fingerprint": fp} for fp in sorted(picked)],
    }
    Path(out).write_text(_one_item_a_line(report), encoding="utf-8")
    _frozen_file.cache_clear()
    return report


def _one_item_a_line(report: dict[str, Any]) -> str:
    """JSON with each frozen item on its own line (a reviewable diff, a small file)."""
    lines = ["{"]
    for number, (key, value) in enumerate(report.items()):
        end = "," if number < len(report) - 1 else ""
        if not isinstance(value, dict):
            lines.append(f" {json.dumps(key)}: {json.dumps(value)}{end}")
            continue
        lines.append(f" {json.dumps(key)}: {{")
        for inner, (name, item) in enumerate(value.items()):
            close = "," if inner < len(value) - 1 else ""
            if isinstance(item, list):
                rows = ",\n".join(f"   {json.dumps(row, separators=(', ', ': '))}" for row in item)
                lines.append(f"  {json.dumps(name)}: [\n{rows}\n  ]{close}")
            else:
                lines.append(f"  {json.dumps(name)}: {json.dumps(item)}{close}")
        lines.append(f" }}{end}")
    return "\n".join([*lines, "}"]) + "\n"


if __name__ == "__main__":  # pragma: no cover - run once, to write the committed file
    import sys

    written = freeze(sys.argv[1] if len(sys.argv) > 1 else "../shared/data")
    for dataset in ("sgd", "multiwoz", "clinc150"):
        part = written[dataset]
        print(f"{dataset}: {len(part.get('dialogues') or part.get('messages'))} of {part['of']} frozen")
