"""Work done once per machine instead of at every start: derived files kept on disk by key.

A start used to redo the same preparation every time: the fast embedder's graph (its
int8 weights and their calibration, about a second of CPU), its tokenizer's tables, the
tokenizer's 200,000-entry BPE table parsed from base64. Each is a pure function of files
that only change with an upgrade, so it is kept here, under a key made of everything it
is derived from (file sizes and times, package versions, the code that builds it), and
built again when any of those changes.

Where: ``$XDG_CACHE_HOME/scopehub/`` (``~/.cache/scopehub``), or ``HUB_CACHE_DIR``. A file
that cannot be read (absent, cut short, another version's) is built again; one that cannot
be written costs only the next start. Writes are atomic (a temporary file, then a rename),
so two processes starting at once never read half a file. Values are ``bytes`` (a graph)
or ``marshal``-able data (dicts, lists, strings, numbers: nothing that runs code when read).
Each upgrade or new checkout keys its own files (the graph alone is 22 MB), so only the
few most recently used of one name are kept: a read marks its file used.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import marshal
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = ["cache_dir", "file_key", "kept", "load_bytes", "load_data", "save_bytes", "save_data", "source_key"]

log = logging.getLogger(__name__)

_MAGIC = b"scopehub-cache-1\n"
KEPT_PER_NAME = 4  # several installs or checkouts side by side on one machine each keep theirs
_PYTHON = f"python {sys.version_info[0]}.{sys.version_info[1]}"  # marshal's format is the interpreter's


def cache_dir() -> Path:
    configured = os.environ.get("HUB_CACHE_DIR")
    if configured:
        return Path(configured)
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "scopehub"


def file_key(*paths: str | Path) -> str:
    """What identifies these files' contents without reading them: path, size, modification time."""
    parts = []
    for path in paths:
        stat = Path(path).stat()
        parts.append(f"{Path(path).resolve()}:{stat.st_size}:{stat.st_mtime_ns}")
    return "|".join(parts)


def source_key(module: Any) -> str:
    """A hash of a module's source: its cached results are built again when the code changes."""
    return hashlib.sha256(Path(module.__file__).read_bytes()).hexdigest()[:16]


def _path(name: str, key: Sequence[str]) -> Path:
    digest = hashlib.sha256("\n".join(key).encode("utf-8", "surrogateescape")).hexdigest()[:20]
    return cache_dir() / f"{name}-{digest}.bin"


def kept(name: str, key: Sequence[str], *, data: bool = False) -> bool:
    """Whether something is kept under ``name`` and ``key`` (a file there; not read)."""
    return _path(name, [*key, _PYTHON] if data else key).is_file()


def load_bytes(name: str, key: Sequence[str]) -> bytes | None:
    """The bytes kept under ``name`` and ``key``; None when there are none (or unreadable)."""
    path = _path(name, key)
    try:
        raw = path.read_bytes()
    except OSError:
        return None
    if not raw.startswith(_MAGIC):
        return None
    with contextlib.suppress(OSError):
        os.utime(path)  # used: the last to be removed when newer keys are written
    return raw[len(_MAGIC) :]


def save_bytes(name: str, key: Sequence[str], value: bytes) -> None:
    path = _path(name, key)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        temporary.write_bytes(_MAGIC + value)
        temporary.replace(path)
    except OSError as exc:
        log.debug("cache file %s not written (%s); it is built again at the next start", path, exc)
        return
    _prune(name)


def _prune(name: str, keep: int = KEPT_PER_NAME) -> None:
    """Remove all but the ``keep`` most recently used files of ``name`` (other versions' keys)."""
    def used(path: Path) -> float:
        try:
            return path.stat().st_mtime
        except OSError:
            return 0.0

    files = sorted(cache_dir().glob(f"{name}-{'?' * 20}.bin"), key=used, reverse=True)
    for old in files[keep:]:
        with contextlib.suppress(OSError):  # another process may have removed it first
            old.unlink()


def load_data(name: str, key: Sequence[str]) -> Any:
    """Like :func:`load_bytes` for ``marshal``-able data; None when there is none."""
    raw = load_bytes(name, [*key, _PYTHON])
    if raw is None:
        return None
    try:
        return marshal.loads(raw)
    except (EOFError, ValueError, TypeError):
        return None


def save_data(name: str, key: Sequence[str], value: Any) -> None:
    save_bytes(name, [*key, _PYTHON], marshal.dumps(value))
