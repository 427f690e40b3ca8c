"""Erasure: the one place maildir files are deleted, because the person asked to be forgotten."""

from __future__ import annotations

import logging
import os
import shutil
from pathlib import Path

from .files import Rejected, parse_dispatch_text, read_regular, scalar
from .layout import scope_folder
from .status import subdirs

__all__ = ["erase_scope"]

log = logging.getLogger(__name__)


def _count_files(path: Path) -> int:
    return sum(len(files) for _dirpath, _dirnames, files in os.walk(path))


def _remove_tree(path: Path) -> int:
    if not os.path.lexists(path):
        return 0
    if path.is_symlink() or not path.is_dir():
        os.unlink(path)
        return 1
    count = _count_files(path)
    shutil.rmtree(path)
    return count


def _scope_of(path: str) -> str | None:
    try:
        meta, _body = parse_dispatch_text(read_regular(Path(path)))
        return scalar(meta, "scope")
    except (Rejected, OSError):
        return None


def erase_scope(root: Path, scope: str) -> dict[str, int]:
    """Delete everything the maildir holds for ``scope``; returns how many files per place.

    Removes ``<scope folder>/`` (every inbox: tmp, new, cur), ``receipts/<scope folder>/``,
    ``dlq/<scope folder>/``, and the outbox files whose front matter names the scope
    (replies and dispatches out from that conversation).
    """
    root = Path(root)
    folder = scope_folder(scope)
    removed = {
        "inbox": _remove_tree(root / folder),
        "receipts": _remove_tree(root / "receipts" / folder),
        "dlq": _remove_tree(root / "dlq" / folder),
        "outbox": 0,
    }
    for team in subdirs(os.fspath(root / "outbox")):
        for state in ("tmp", "new", "cur"):
            box = os.path.join(team.path, state)
            try:
                names = os.listdir(box)
            except FileNotFoundError:
                continue
            for name in names:
                path = os.path.join(box, name)
                if _scope_of(path) == scope:
                    os.unlink(path)
                    removed["outbox"] += 1
    log.info("maildir: erased %s: %s", scope, removed)
    return removed
