"""search_memory as a person's question meets it: what was kept, and what they said, first."""

from __future__ import annotations

from scopehub import memory
from scopehub.agents import search_memory
from scopehub.agents.notes import save_note
from tests.agents.helpers import NOW, call, make_ctx


def _say(store: memory.Store, role: str, text: str, agent: str, ts: float) -> None:
    sender = "1" if role == "user" else None
    store.append(memory.NewMessage(scope="user:1", role=role, text=text, sender=sender, agent=agent, ts=ts))


def test_a_kept_note_comes_before_the_bots_replies_that_repeat_its_words(store: memory.Store) -> None:
    ts = NOW - 3600
    _say(store, "user", "jot down that the car's tyre pressure should be 2.4 bar", "notes", ts)
    call(save_note, make_ctx(store, message_id=1), text="the car's tyre pressure should be 2.4 bar")
    _say(store, "agent", "Saved note #1: the car's tyre pressure should be 2.4 bar", "notes", ts + 1)
    for minute in range(8):  # a busy list that names the car again and again
        _say(store, "user", f"what's on my list, car stuff {minute}?", "tasks", ts + 60 * minute + 2)
        _say(store, "agent", f"#1 renew car insurance\n#2 wash the car {minute}", "tasks", ts + 60 * minute + 3)
    lines = call(search_memory, make_ctx(store), query="car").splitlines()
    assert len(lines) == 5
    assert "[note #1]" in lines[0] and "2.4 bar" in lines[0]
    # A person's message is theirs, whichever agent it was routed to.
    assert all("[user]" in line for line in lines[1:])
