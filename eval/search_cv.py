"""Nested cross-validation of archive search settings on LoCoMo (leave conversations out).

Each setting of a small grid of ``memory._search``'s documented constants is evaluated
over K folds of the conversations; for each fold the setting with the best hit@10 on the
other folds (their questions pooled) is chosen and scored on the held-out one. The mean
of those held-out scores is what a conversation this project does not ship would see
from choosing the settings this way. An evaluation tool: it sets module constants for
the duration of each run, in this process only.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from scopehub.memory import _search, _search_base, _search_rank, _search_text, _search_typos
from scopehub.memory.postgres import search as pg_search

from .search_locomo import evaluate_locomo

__all__ = ["SEARCH_GRID", "format_nested", "nested_locomo"]

# The constants the folds choose (each value is a setting of the search as shipped or near it).
SEARCH_GRID: Mapping[str, Sequence[Any]] = {
    "_CTX_WEIGHT": (0.3, 0.5, 0.7),
    "_DATE_WEIGHT": (0.0, 1.0, 2.0),
    "_SENDER_CREDIT": (0.0, 1.0),
    "framing_stopwords": (False, True),
}


# Every module of the search that holds a constant by name: the grid sets it in each of them
# (``from ._search_base import _CTX_WEIGHT`` binds a module's own name, read at call time).
_SEARCH_MODULES = (_search_base, _search, _search_text, _search_typos, _search_rank, pg_search)


@contextmanager
def _settings(values: Mapping[str, Any]) -> Iterator[None]:
    names = ("STOPWORDS", *(name for name in values if name != "framing_stopwords"))
    saved = [(module, name, getattr(module, name)) for module in _SEARCH_MODULES for name in names if hasattr(module, name)]
    try:
        for name, value in values.items():
            if name == "framing_stopwords":
                base = _search_base.STOPWORDS - _search_base.QUESTION_FRAMING
                name, value = "STOPWORDS", base | _search_base.QUESTION_FRAMING if value else base
            for module in _SEARCH_MODULES:
                if hasattr(module, name):
                    setattr(module, name, value)
        yield
    finally:
        for module, name, value in saved:
            setattr(module, name, value)


def _label(values: Mapping[str, Any]) -> str:
    return " ".join(f"{name.strip('_').lower()}={value}" for name, value in values.items())


def nested_locomo(
    path: str | Path, *, folds: int = 5, grid: Mapping[str, Sequence[Any]] = SEARCH_GRID, progress: Any = None
) -> dict[str, Any]:
    """Hybrid hit@10 per fold for every setting of ``grid``, and the nested (held-out) figure."""
    from scopehub.eval.routing import spread

    if folds < 2:
        raise ValueError("nested cross-validation needs at least 2 folds")
    names = list(grid)
    runs: list[dict[str, Any]] = []
    for number, combo in enumerate(itertools.product(*(grid[name] for name in names))):
        values = dict(zip(names, combo, strict=True))
        with _settings(values):
            result = evaluate_locomo(path, methods=("hybrid",), ks=(10,), folds=folds)
        figures = result["folds"]["hybrid"]["hit@10"]["values"]
        runs.append({"settings": values, "label": _label(values), "folds": figures,
                     "questions": result["fold_questions"], "overall": result["methods"]["hybrid"]["hit@10"]})
        if progress is not None:
            progress(number + 1, len(list(itertools.product(*grid.values()))))
    held_out: list[float] = []
    chosen: list[str] = []
    for fold in range(len(runs[0]["folds"])):
        def trained(run: dict[str, Any], fold: int = fold) -> float:
            pairs = [(v, n) for i, (v, n) in enumerate(zip(run["folds"], run["questions"], strict=True)) if i != fold]
            return sum(v * n for v, n in pairs) / sum(n for _, n in pairs)

        best = max(runs, key=trained)  # first in grid order on a tie
        held_out.append(best["folds"][fold])
        chosen.append(best["label"])
    return {"grid": {name: list(values) for name, values in grid.items()}, "runs": runs,
            "nested": spread(held_out), "chosen": chosen}


def format_nested(result: dict[str, Any]) -> str:
    """Each setting's fold figures, then the nested hit@10 and what each fold chose."""
    from scopehub.eval.routing import format_spread

    lines = ["setting: hybrid hit@10 overall, per fold"]
    for run in result["runs"]:
        lines.append(f"  {run['label']}: {run['overall']:.3f}  [{' '.join(f'{v:.3f}' for v in run['folds'])}]")
    lines.append(f"nested (chosen on the other folds, scored on each): {format_spread(result['nested'], percent=False)}")
    lines.append("  per fold: " + " ".join(f"{v:.3f}" for v in result["nested"]["values"]))
    lines.extend(f"  fold {i}: {label}" for i, label in enumerate(result["chosen"]))
    return "\n".join(lines)
