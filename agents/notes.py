"""``notes``: save, list, read and delete notes; they live in the vault, so search finds them."""

from __future__ import annotations

from pydantic import BaseModel, Field

from scopehub import memory

from ._dates import format_datetime, local_now
from ._spec import AgentSpec, ToolContext, tool

NAME = "notes"
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


# Example utterances per tool: the embedded model picks its tool from them, and the ones
# with arguments are the demonstrations it writes arguments from (hosted models never see them).
@tool(
    examples=(
        ("take a note: the gate code is 4711", {"text": "the gate code is 4711"}),
        ("note that Sam's birthday is on June 4", {"text": "Sam's birthday is on June 4"}),
        ("save this: parking spot is level 3, row F", {"text": "parking spot is level 3, row F"}),
        ("keep this idea for later: an app for plant watering", {"text": "an app for plant watering"}),
        "jot down the recipe for pancakes",
        "write down my passport number",
        "note: call the bank about the card",
        "remember this for me",
        'make a note: the boiler pressure should be 1.5 bar',
        'jot this: meeting room is B12',
        'write this down: bike lock code 3391',
        'note to self: call the bank on monday',
        "save a note that the cat's vet is Dr. Lee",
        'keep a note of the wifi name, HomeNet',
        'Notiz: Der Zählerstand ist 48213',
        'Note : le code du portail est 1234',
        'Nota: la clave del trastero es 9090',
        'Notiere dir: Müllabfuhr ist dienstags',
        'Apunta que el dentista se llama Dr. Ruiz',
        'Prends note : la réunion est en salle 4',
    ),
    keywords=('note', 'jot', 'write', 'save', 'remember', 'keep', 'notiz', 'notiere', 'nota', 'apunta', 'guarda'),
)
def save_note(ctx: ToolContext, args: SaveNoteArgs) -> str:
    """Save a note."""
    title = (args.title or "").strip() or _title(args.text)
    with ctx.transaction():
        item = memory.add_vault_item(
            ctx.store,
            ctx.scope,
            KIND,
            args.text.strip(),
            title=title,
            agent=NAME,
            source_message=ctx.message_id,
            now=ctx.now(),
        )
        ctx.emit("note.saved", {"note_id": item.number, "title": item.title}, agent=NAME)
    return f"Saved note #{item.number}: {item.title}"


@tool(
    examples=(
        "show my notes", "what notes do I have", "list my notes", "my notes please", "which notes did I save",
        "what have I written down", "give me all my notes", "Was habe ich alles notiert?", "Affiche mes notes", "Enséñame mis notas",
        'what did I note so far',
        'list all notes',
        'show everything I noted',
        'Welche Notizen habe ich?',
        'Quelles notes ai-je ?',
        '¿Qué notas tengo?',
    ),
    keywords=('show', 'list', 'all', 'which', 'zeig', 'montre', 'muestra'),
)
def list_notes(ctx: ToolContext, args: ListNotesArgs) -> str:
    """List notes, newest first."""
    items = memory.list_vault_items(ctx.store, ctx.scope, KIND, limit=args.limit)
    if not items:
        return "No notes."
    return "\n".join(f"#{item.number} {_when(ctx, item.created)} {item.title}" for item in items)


@tool(
    examples=(
        ("read note 4", {"id": 4}), ("show me note 2 in full", {"id": 2}), "open that note", "read the note about the wifi",
        "what does note 1 say", "open the note about the boiler", "Lies Notiz 2 vor", "Affiche la note 3",
        'read me the note about parking',
        'show note 5',
        "what's in the wifi note",
        'open note 1',
        'Zeig Notiz 3',
        'Lis la note sur le wifi',
        'Lee la nota 2',
    ),
    keywords=('read', 'open', 'say', 'lies', 'affiche', 'lee'),
)
def read_note(ctx: ToolContext, args: NoteIdArgs) -> str:
    """Read one note in full."""
    item = memory.vault_item_by_number(ctx.store, ctx.scope, KIND, args.id)
    if item is None:
        return f"No note #{args.id}; call list_notes or search_memory."
    body = item.body if len(item.body) <= _READ_CHARS else item.body[:_READ_CHARS] + "\n[cut]"
    return f"#{item.number} {item.title} ({_when(ctx, item.created)})\n{body}"


@tool(
    examples=(
        ("delete note 3", {"id": 3}), ("remove note 2", {"id": 2}), "delete the note about parking", "throw away that note",
        "erase the wifi note", "I don't need the boiler note anymore, delete it", "Lösche Notiz 1", "Supprime la note sur le portail",
        'get rid of note 4',
        'delete my last note',
        'remove the note about the gate code',
        'that parking note can go',
        'Entferne die Notiz über das WLAN',
        'Efface la note 2',
        'Borra la nota del trastero',
    ),
    keywords=('delete', 'remove', 'erase', 'throw', 'drop', 'rid', 'lösche', 'supprime', 'borra', 'elimina'),
)
def delete_note(ctx: ToolContext, args: NoteIdArgs) -> str:
    """Delete a note."""
    item = memory.vault_item_by_number(ctx.store, ctx.scope, KIND, args.id)
    if item is None or not memory.delete_vault_item(ctx.store, ctx.scope, item.id, KIND):
        return f"No note #{args.id}; nothing deleted."
    return f"Deleted note #{item.number}: {item.title}"


agent = AgentSpec(
    name=NAME,
    description="Notes: save, list, read and delete notes and things to remember.",
    instructions=(
        "Keep the person's notes with your tools; save their words, not a paraphrase. "
        "Find older notes with search_memory or list_notes. Refer to notes as #id; confirm before deleting if unsure."
    ),
    examples=(
        "take a note: the wifi password is sunflower42",
        "note that Sam's birthday is on June 4",
        "take a note that the boiler was serviced on monday",
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
    offer_search="always",  # finding what was kept is this agent's job
    tools=(save_note, list_notes, read_note, delete_note),
    emits=("note.saved",),
    interests=("fact.learned",),
    collaborators=("general",),
)
