"""Safe writes (tmp/ -> new/), moves that never overwrite, and the front matter format.

Publishing a file: write it under a unique name in ``tmp/``, fsync it, then give it its
name in ``new/`` in one atomic step and fsync the folder. The step is ``link()`` followed
by removing the tmp name, which is ``rename()`` that refuses to replace an existing file
(a plain rename would silently overwrite a same-named dispatch); where hard links are not
supported it falls back to ``rename()`` after checking the name is free. Readers never
look at ``tmp/``, so they see a file whole or not at all.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import errno
import json
import os
import secrets
import stat
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import yaml
from frontmatter.default_handlers import YAMLHandler

from .layout import MAX_FILE_BYTES, with_suffix

__all__ = [
    "MAX_FRONT_MATTER_BYTES",
    "Rejected",
    "ensure_maildir",
    "move_no_replace",
    "parse_dispatch_text",
    "publish",
    "read_regular",
    "render",
    "write_json_atomic",
    "write_text_atomic",
]

MAX_FRONT_MATTER_BYTES = 64 * 1024
_HANDLER = YAMLHandler()  # python-frontmatter's YAML handler: yaml.SafeLoader / CSafeLoader
_LINK_UNSUPPORTED = {errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EXDEV, errno.EMLINK}


class Rejected(Exception):
    """A file that cannot be delivered; ``reason`` says why in one line (for dlq/)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


# -- writing --------------------------------------------------------------------------


def ensure_maildir(box: Path) -> None:
    """Create ``box/{tmp,new,cur}``."""
    for sub in ("tmp", "new", "cur"):
        (box / sub).mkdir(parents=True, exist_ok=True)


def _fsync_dir(path: Path) -> None:
    with contextlib.suppress(OSError):  # some filesystems cannot fsync a folder
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _link_or_rename(src: Path, dst: Path) -> None:
    """Give ``src`` the name ``dst`` atomically, never replacing a file: FileExistsError if taken."""
    try:
        os.link(src, dst, follow_symlinks=False)
    except FileExistsError:
        raise
    except OSError as exc:
        if exc.errno not in _LINK_UNSUPPORTED:
            raise
        if os.path.lexists(dst):
            raise FileExistsError(errno.EEXIST, "file exists", str(dst)) from None
        os.rename(src, dst)
        return
    with contextlib.suppress(FileNotFoundError):  # another intake finished this same move
        os.unlink(src)


def publish(
    box: Path,
    name: str,
    data: bytes | Iterable[bytes],
    *,
    taken: Callable[[str], bool] | None = None,
    if_exists: str = "suffix",
) -> Path | None:
    """Write ``data`` into ``box/tmp/``, fsync, then publish it as ``box/new/<name>``.

    ``taken(name)`` says whether a name is already used elsewhere (e.g. in ``cur/``).
    ``if_exists``: ``"suffix"`` adds a short random suffix before ``.md`` until the name is
    free; ``"skip"`` writes nothing and returns None (for idempotent writers).
    ``data`` may be an iterable of chunks (streamed into tmp/).
    """
    if if_exists not in ("suffix", "skip"):
        raise ValueError("if_exists must be 'suffix' or 'skip'")

    def used(candidate: str) -> bool:
        return os.path.lexists(box / "new" / candidate) or bool(taken and taken(candidate))

    if if_exists == "skip" and used(name):
        return None
    ensure_maildir(box)
    tmp_path = box / "tmp" / f"{time.time_ns()}.{os.getpid()}.{secrets.token_hex(4)}.tmp"
    fd = os.open(tmp_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o666)
    published = False
    try:
        with os.fdopen(fd, "wb") as handle:
            for chunk in [data] if isinstance(data, bytes | bytearray) else data:
                handle.write(chunk)
            handle.flush()
            os.fsync(handle.fileno())
        candidate = name
        for _attempt in range(50):
            if not used(candidate):
                try:
                    _link_or_rename(tmp_path, box / "new" / candidate)
                except FileExistsError:
                    pass
                else:
                    published = True
                    _fsync_dir(box / "new")
                    return box / "new" / candidate
            if if_exists == "skip":
                return None
            candidate = with_suffix(name)
        raise FileExistsError(errno.EEXIST, "no free name", str(box / "new" / name))
    finally:
        if not published:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp_path)  # our own unpublished temp file, never a message


def move_no_replace(src: Path, dst_dir: Path, name: str) -> Path:
    """Move ``src`` into ``dst_dir`` as ``name`` (or ``name`` with a suffix if taken); never overwrites."""
    dst_dir.mkdir(parents=True, exist_ok=True)
    candidate = name
    for _attempt in range(50):
        try:
            _link_or_rename(src, dst_dir / candidate)
        except FileExistsError:
            candidate = with_suffix(name)
            continue
        _fsync_dir(dst_dir)
        return dst_dir / candidate
    raise FileExistsError(errno.EEXIST, "no free name", str(dst_dir / name))


def write_text_atomic(path: Path, text: str) -> None:
    """Replace ``path`` with ``text`` atomically (temp file beside it, fsync, rename)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.parent / f".{path.name[:100]}.{os.getpid()}.{secrets.token_hex(4)}.tmp"
    try:
        with open(tmp, "wb") as handle:
            handle.write(text.encode("utf-8", "backslashreplace"))
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
    _fsync_dir(path.parent)


def write_json_atomic(path: Path, data: Any) -> None:
    """Replace ``path`` with ``data`` as JSON, atomically."""
    write_text_atomic(path, json.dumps(data, indent=2, sort_keys=True) + "\n")


# -- the format -----------------------------------------------------------------------


def render(meta: dict[str, Any], body: str) -> str:
    """A dispatch file: YAML front matter (None values left out, one line per field) and the body."""
    fields = {key: value for key, value in meta.items() if value is not None}
    front = _HANDLER.export(fields, sort_keys=False, width=1_000_000)
    return f"---\n{front}\n---\n\n{body.strip()}\n"


def read_regular(path: Path, *, limit: int = MAX_FILE_BYTES) -> bytes:
    """The bytes of a regular file, without following symlinks; Rejected if not regular or too big."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise Rejected("not a regular file (a symlink)") from None
        if exc.errno == errno.EISDIR:
            raise Rejected("not a regular file (a folder)") from None
        raise
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise Rejected("not a regular file")
        if info.st_size > limit:
            raise Rejected(f"over 1 MiB ({info.st_size} bytes)")
        data = handle.read(limit + 1)
    if len(data) > limit:
        raise Rejected(f"over 1 MiB (grew to more than {limit} bytes)")
    return data


def parse_dispatch_text(raw: bytes) -> tuple[dict[str, Any], str]:
    """Split a dispatch file into its front matter (a mapping) and body; Rejected with the reason."""
    if b"\x00" in raw:
        raise Rejected("contains NUL bytes")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise Rejected(f"not UTF-8 text (byte 0x{raw[exc.start]:02x} at offset {exc.start})") from None
    text = text.removeprefix("\ufeff")
    if not _HANDLER.detect(text):
        raise Rejected("no front matter: the file must start with a '---' line")
    try:
        front, body = _HANDLER.split(text)
    except ValueError:
        raise Rejected("front matter is not closed by a '---' line") from None
    if len(front.encode("utf-8")) > MAX_FRONT_MATTER_BYTES:
        raise Rejected(f"front matter over {MAX_FRONT_MATTER_BYTES // 1024} KiB")
    if _uses_aliases(front):
        raise Rejected(
            "front matter uses YAML anchors or aliases (&name, *name): dispatch fields are plain values,"
            " and anchors are what YAML bombs are built from"
        )
    try:
        meta = _HANDLER.load(front)
    except yaml.YAMLError as exc:
        problem = str(getattr(exc, "problem", None) or exc).splitlines()[0]
        raise Rejected(f"front matter is not valid YAML: {problem}") from None
    except (RecursionError, MemoryError, ValueError, TypeError) as exc:
        detail = str(exc).splitlines()[0][:120] if str(exc) else ""
        raise Rejected(f"front matter is not valid YAML: {type(exc).__name__} {detail}".strip()) from None
    if meta is None:
        raise Rejected("front matter is empty")
    if not isinstance(meta, dict):
        raise Rejected(f"front matter must be a mapping of fields, not a {type(meta).__name__}")
    return meta, body.strip()


def _uses_aliases(front: str) -> bool:
    """Whether YAML text defines an anchor or uses an alias (read as events: nothing is built).

    A billion-laughs bomb under a field the intake ignores would otherwise be accepted,
    and anything that later walks the front matter (a log line, a JSON copy) would expand
    it. Text that does not parse is left to the loader, which says why.
    """
    if "&" not in front and "*" not in front:
        return False
    try:
        for event in yaml.parse(front, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)):
            if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None):
                return True
    except (yaml.YAMLError, RecursionError, MemoryError, ValueError, TypeError):
        return False
    return False


def scalar(meta: dict[str, Any], key: str, *, single_line: bool = True) -> str | None:
    """A front matter field as text, None if absent; Rejected if it is a list or a mapping."""
    value = meta.get(key)
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, _dt.datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=_dt.UTC)
        return value.astimezone(_dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    if isinstance(value, str | int | float | _dt.date):
        text = value.isoformat() if isinstance(value, _dt.date) else str(value)
        return " ".join(text.split()) if single_line else text
    raise Rejected(f"field {key!r} must be a single value, not a {type(value).__name__}")
