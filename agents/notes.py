"""``notes``: save, list, read and delete notes; they live in the vault, so search finds them."""

from __future__ import annotations

from pydantic import BaseModel, Field

from scopehub import memory

from ._dates import format_datetime, local_now
from ._spec import AgentSpec, ToolContext, tool

KIND = "note"
_TITLE_CHARS = 60
_READ_CHARS = 3000  # a note read back is context for the next call: keep it bounded


def _title(text: str) -> str:
    first = next((line.strip() for line in text.splitlines() if line.strip()), "")
    return first if len(first) <= _TITLE_CHARS else first[: _TITLE_CHARS - 1].rstrip() + "…"


def _when(ctx: ToolContext, ts: float) -> str:
    return format_datetime(local_now(ts, ctx.extra.get("timezone", "UTC")))


class SaveNoteArgs(BaseModel):
    text: str
    title: str | None = Field(None, description="short; default: first line")


class ListNotesArgs(BaseModel):
    limit: int = Field(20, ge=1, le=50)


class NoteIdArgs(BaseModel):
    id: int


@tool
def save_note(ctx: ToolContext, args: SaveNoteArgs) -> str:
    """Save a note."""
    title = (args.title or "").strip() or _title(args.text)
    item = memory.add_vault_item(
        ctx.store,
        ctx.scope,
        KIND,
        args.text.strip(),
        title=title,
        agent="notes",
        source_message=ctx.message_id,
        now=ctx.now(),
    )
    return f"Saved note #{item.id}: {item.title}"


@tool
def list_notes(ctx: ToolContext, args: ListNotesArgs) -> str:
    """List notes, newest first."""
    items = memory.list_vault_items(ctx.store, ctx.scope, KIND, limit=args.limit)
    if not items:
        return "No notes."
    return "\n".join(f"#{item.id} {_when(ctx, item.created)} {item.title}" for item in items)


@tool
def read_note(ctx: ToolContext, args: NoteIdArgs) -> str:
    """Read one note in full."""
    item = memory.get_vault_item(ctx.store, ctx.scope, args.id, KIND)
    if item is None:
        return f"No note #{args.id}; call list_notes or search_memory."
    body = item.body if len(item.body) <= _READ_CHARS else item.body[:_READ_CHARS] + "\n[cut]"
    return f"#{item.id} {item.title} ({_when(ctx, item.created)})\n{body}"


@tool
def delete_note(ctx: ToolContext, args: NoteIdArgs) -> str:
    """Delete a note."""
    item = memory.get_vault_item(ctx.store, ctx.scope, args.id, KIND)
    if item is None or not memory.delete_vault_item(ctx.store, ctx.scope, args.id, KIND):
        return f"No note #{args.id}; nothing deleted."
    return f"Deleted note #{item.id}: {item.title}"


agent = AgentSpec(
    name="notes",
    description="Notes: save, list, read and delete notes and things to remember.",
    instructions=(
        "Keep the person's notes with your tools; save their words, not a paraphrase. "
        "Find older notes with search_memory or list_notes. Refer to notes as #id; confirm before deleting if unsure."
    ),
    examples=(
        "take a note: the wifi password is sunflower42",
        "note that Sam's birthday is on June 4",
        "save this: parking spot is level 3, row F",
        "jot down the recipe for pancakes",
        "write down my passport number",
        "show my notes",
        "what notes do I have",
        "read note 4",
        "what did I write about the wifi",
        "delete the note about parking",
        "remove note 2",
        "keep this idea for later: an app for plant watering",
        # The same requests in other languages: their words and character n-grams find
        # this agent when a message has no English in it (one per language; tests use others).
        "Speichere eine Notiz: Reisepassnummer C01X00T47",
        "Note ceci : le numéro de la place de parking est 112",
        "Guarda una nota: la contraseña del wifi es girasol42",
        "Сохрани заметку: код от домофона 4512",
        "メモを保存して：Wi-Fiのパスワードはhimawari42",
        "यह नोट सेव करो: पासपोर्ट नंबर 4512 है",
        "احفظ ملاحظة: رقم جواز السفر 4512",
    ),
    keywords=(
        "note", "notes", "jot", "write down", "idea", "memo",
        "notiz", "notizen", "nota", "notas", "заметка", "заметки", "запиши", "メモ", "नोट", "ملاحظة", "ملاحظات",
    ),
    tools=(save_note, list_notes, read_note, delete_note),
)
