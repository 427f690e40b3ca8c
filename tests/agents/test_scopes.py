"""Nothing crosses scopes: a second customer never sees or touches the first one's records."""

from __future__ import annotations

from scopehub import memory
from scopehub.agents.inbox import draft_reply, keep_email, list_emails, read_email
from scopehub.agents.notes import delete_note, list_notes, read_note, save_note
from scopehub.agents.reminders import cancel_reminder, list_reminders, set_reminder
from scopehub.agents.tasks import add_task, complete_task, edit_task, list_tasks
from tests.agents.helpers import call, make_ctx


def test_second_scope_sees_and_changes_nothing_of_the_first(store: memory.Store) -> None:
    alice = make_ctx(store, scope="user:1")
    bob = make_ctx(store, scope="group:-200")
    call(add_task, alice, title="secret task")
    call(save_note, alice, text="secret note")
    call(set_reminder, alice, text="secret reminder", when="in 5 minutes")
    call(keep_email, alice, text="From: a@example.com\nSubject: secret mail\n\nPlease reply.")

    assert call(list_tasks, bob).endswith("No tasks.")
    assert call(list_notes, bob) == "No notes."
    assert call(list_reminders, bob).endswith("No active reminders.")
    assert call(list_emails, bob) == "No emails kept."

    # Guessing ids does not help.
    assert call(complete_task, bob, id=1).startswith("No task #1")
    assert call(edit_task, bob, id=1, title="mine now").startswith("No task #1")
    assert call(read_note, bob, id=1).startswith("No note #1")
    assert call(delete_note, bob, id=1).startswith("No note #1")
    assert call(cancel_reminder, bob, id=1).startswith("No active reminder #1")
    assert call(read_email, bob, id=2).startswith("No email #2")
    assert call(draft_reply, bob, email_id=2, body="hi").startswith("No email #2")

    assert "secret task" in call(list_tasks, alice)
    assert "secret note" in call(list_notes, alice)
    assert "secret reminder" in call(list_reminders, alice)
    assert "secret mail" in call(list_emails, alice)
    assert memory.get_task(store, "user:1", 1).done is False
    # Delivery is global, but every due reminder carries its own scope and chat.
    assert [(r.scope, r.text) for r in memory.pending_reminders(store)] == [("user:1", "secret reminder")]
