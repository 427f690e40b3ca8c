"""What a Telegram message carries besides text: media kinds and their markers, text
documents worth keeping, and where a forward came from.

Pure functions over PTB's ``Message``; the downloads happen in :mod:`.bot`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import PurePosixPath

from telegram import (
    Message,
    MessageOriginChannel,
    MessageOriginChat,
    MessageOriginHiddenUser,
    MessageOriginUser,
)

__all__ = [
    "MAX_DOCUMENT_BYTES",
    "TEXT_DOCUMENT_SUFFIXES",
    "Media",
    "describe_media",
    "forward_origin",
    "read_text_document",
]

# A document the hub keeps in the vault: plain text in one of these forms, up to 1 MB.
TEXT_DOCUMENT_SUFFIXES = frozenset({".txt", ".md", ".csv", ".eml", ".json"})
MAX_DOCUMENT_BYTES = 1_000_000

# (attribute of Message, what people call it). Order matters: an animation also
# carries a ``document``, so it is checked first.
_KINDS = (
    ("animation", "animation"),
    ("photo", "photo"),
    ("video_note", "video note"),
    ("voice", "voice note"),
    ("video", "video"),
    ("audio", "audio"),
    ("sticker", "sticker"),
    ("document", "document"),
    ("location", "location"),
    ("venue", "venue"),
    ("contact", "contact"),
    ("poll", "poll"),
    ("dice", "dice"),
)


@dataclass(frozen=True, slots=True)
class Media:
    """One attachment: its kind as people say it, its file name (if any) and the stored marker."""

    kind: str
    name: str | None
    file_id: str | None
    file_size: int | None

    @property
    def marker(self) -> str:
        """``[photo]``, ``[document: report.pdf]``: what is stored when no caption says more."""
        return f"[{self.kind}: {self.name}]" if self.name else f"[{self.kind}]"

    def for_agent(self, *, kept: bool = False) -> str:
        """The marker with what the agent can make of it, put before a caption: the agent is
        told it cannot open the file, or (``kept``) where the text of a document went."""
        note = "kept in this chat's notes" if kept else "you cannot open it"
        return f"{self.marker[:-1]}; {note}]"

    @property
    def is_text_document(self) -> bool:
        """A document the hub can read and keep (by its name and announced size)."""
        return (
            self.kind == "document"
            and self.name is not None
            and PurePosixPath(self.name.lower()).suffix in TEXT_DOCUMENT_SUFFIXES
            and (self.file_size is None or self.file_size <= MAX_DOCUMENT_BYTES)
        )


def describe_media(message: Message) -> Media | None:
    """The message's attachment, or None for a text-only (or service) message."""
    for attribute, kind in _KINDS:
        value = getattr(message, attribute, None)
        if not value:
            continue
        if isinstance(value, tuple):  # photo: sizes, smallest first
            value = value[-1]
        name = getattr(value, "file_name", None)
        if attribute == "audio":
            name = name or getattr(value, "title", None)
        elif attribute == "sticker":
            name = getattr(value, "emoji", None)
        return Media(kind, name, getattr(value, "file_id", None), getattr(value, "file_size", None))
    return None


def read_text_document(data: bytes | bytearray) -> str | None:
    """The text of a downloaded document: None when too large, not UTF-8, or empty."""
    if len(data) > MAX_DOCUMENT_BYTES:
        return None
    try:
        text = bytes(data).decode("utf-8-sig")
    except UnicodeDecodeError:
        return None
    return text if text.strip() and "\x00" not in text else None


def forward_origin(message: Message) -> str | None:
    """Who a forwarded message came from (a person's name or a chat's title), else None."""
    origin = message.forward_origin
    if origin is None:
        return None
    if isinstance(origin, MessageOriginUser):
        return origin.sender_user.full_name or origin.sender_user.username or str(origin.sender_user.id)
    if isinstance(origin, MessageOriginHiddenUser):
        return origin.sender_user_name
    if isinstance(origin, MessageOriginChat):
        return origin.sender_chat.title or origin.sender_chat.effective_name or str(origin.sender_chat.id)
    if isinstance(origin, MessageOriginChannel):
        return origin.chat.title or origin.chat.effective_name or str(origin.chat.id)
    return "unknown"
