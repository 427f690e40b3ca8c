"""CLINC150: (text, domain) pairs of a split, domains mapped from their intents."""

from __future__ import annotations

from ._base import DatasetFormatError, PathLike, as_str, find_beside, read_json, resolve_path


def clinc_domains(path: PathLike) -> dict[str, list[str]]:
    """Domain -> intents from CLINC150's domains.json (the file or its directory)."""
    target = resolve_path(path)
    file = find_beside(target, "domains.json") if target.is_dir() else target
    if file is None:
        raise DatasetFormatError(
            f"{target}: expected domains.json or domains.json.gz in this directory"
        )
    data = read_json(file)
    if not isinstance(data, dict) or not all(isinstance(v, list) for v in data.values()):
        raise DatasetFormatError(
            f"{file}: expected a JSON object mapping each domain to a list of intents"
        )
    return {as_str(domain): [as_str(i) for i in intents] for domain, intents in data.items()}


def load_clinc(
    path: PathLike, split: str, *, domains_path: PathLike | None = None
) -> list[tuple[str, str | None]]:
    """(text, domain) pairs of one CLINC150 split; the domain is None for out-of-scope items."""
    file = resolve_path(path)
    if file.is_dir():
        found = sorted(
            p for p in file.glob("data_*.json*") if p.name.endswith((".json", ".json.gz"))
        )
        if len(found) != 1:
            names = ", ".join(p.name for p in found) or "none"
            raise DatasetFormatError(
                f"{file}: expected exactly one data_*.json[.gz] file (found: {names})"
            )
        file = found[0]
    if domains_path is None:
        beside = find_beside(file.parent, "domains.json")
        if beside is None:
            raise DatasetFormatError(
                f"{file}: expected domains.json[.gz] beside it (or pass domains_path=...)"
            )
        domains_path = beside
    domain_of = {
        intent: domain
        for domain, intents in clinc_domains(domains_path).items()
        for intent in intents
    }
    data = read_json(file)
    if not isinstance(data, dict):
        raise DatasetFormatError(
            f"{file}: expected CLINC150, a JSON object of splits (train, val, ...)"
        )
    if split not in data:
        available = ", ".join(sorted(data)) or "none"
        raise DatasetFormatError(f"{file}: no split {split!r}; available splits: {available}")
    items = data[split]
    if not isinstance(items, list):
        raise DatasetFormatError(
            f"{file}: split {split!r}: expected a list of [text, intent] pairs"
        )
    pairs: list[tuple[str, str | None]] = []
    for number, item in enumerate(items):
        if isinstance(item, list | tuple) and len(item) == 2:
            text, intent = item
        elif isinstance(item, dict) and "text" in item and "intent" in item:
            text, intent = item["text"], item["intent"]
        else:
            raise DatasetFormatError(
                f"{file}: split {split!r} item {number}: expected [text, intent]"
            )
        intent = as_str(intent)
        if intent == "oos":
            pairs.append((as_str(text), None))
        elif intent in domain_of:
            pairs.append((as_str(text), domain_of[intent]))
        else:
            raise DatasetFormatError(
                f"{file}: split {split!r} item {number}: intent {intent!r} is in no domain of {domains_path}"
            )
    return pairs
