"""The notes agent's tools: notes live in the vault, where archive search finds them."""

from __future__ import annotations

from scopehub import memory
from scopehub.agents.notes import delete_note, list_notes, read_note, save_note
from tests.agents.helpers import NOW, call, make_ctx


def test_save_list_read_delete(store: memory.Store) -> None:
    ctx = make_ctx(store, message_id=None)
    assert call(save_note, ctx, text="The wifi password is sunflower42") == "Saved note #1: The wifi password is sunflower42"
    assert call(save_note, ctx, text="Parking: level 3, row F\nnear the lift", title="Parking") == "Saved note #2: Parking"

    assert call(list_notes, ctx).splitlines() == [
        "#2 Wed 2024-05-01 14:30 Parking",
        "#1 Wed 2024-05-01 14:30 The wifi password is sunflower42",
    ]
    assert call(read_note, ctx, id=2) == "#2 Parking (Wed 2024-05-01 14:30)\nParking: level 3, row F\nnear the lift"

    assert call(delete_note, ctx, id=2) == "Deleted note #2: Parking"
    assert call(read_note, ctx, id=2).startswith("No note #2")
    assert call(delete_note, ctx, id=2) == "No note #2; nothing deleted."
    assert "Parking" not in call(list_notes, ctx)


def test_a_note_is_a_vault_row_the_archive_indexes(store: memory.Store) -> None:
    ctx = make_ctx(store, message_id=7)
    long_first_line = "Ideas for the garden party " + "with lanterns " * 10
    call(save_note, ctx, text=long_first_line + "\nand lemonade")
    rows = store.query("SELECT scope, kind, title, body, agent, source_message, created FROM vault")
    assert len(rows) == 1
    scope, kind, title, body, agent, source, created = rows[0]
    assert (scope, kind, agent, source, created) == ("user:1", "note", "notes", 7, NOW)
    assert body.endswith("and lemonade")
    assert len(title) <= 60 and title.startswith("Ideas for the garden party")


def test_saved_note_is_found_by_search(store: memory.Store) -> None:
    call(save_note, make_ctx(store), text="The wifi password is sunflower42")
    hits = store.search("user:1", "wifi password", k=5)
    assert any("sunflower42" in (hit.text or hit.snippet) for hit in hits)
