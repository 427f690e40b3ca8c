"""general's ``dispatch`` tool: a file in the outside team's outbox and its event, together."""

from __future__ import annotations

from functools import partial

import pytest

from scopehub.agents import ToolContext
from scopehub.agents.general import DispatchArgs, dispatch
from scopehub.hub.transports.maildir import dispatch_out, list_outbox, read_outbox
from scopehub.memory import Store, recent_events


def test_a_dispatch_is_a_file_in_the_outbox_and_an_event(tmp_path):
    store = Store(tmp_path / "hub.db")
    root = tmp_path / "maildir"
    ctx = ToolContext(store=store, scope="user:1", extra={"dispatch": partial(dispatch_out, root)}, agent="general")
    answer = dispatch.func(ctx, DispatchArgs(to="ci", subject="rerun the nightly build", body="It failed at 02:00.", priority="urgent"))
    ((name, _),) = list_outbox(root, "ci")
    assert name in answer
    item = read_outbox(root, "ci", name)
    assert item.body.strip() == "It failed at 02:00." and item.sender == "general" and item.priority == "urgent"
    (event,) = recent_events(store, "user:1")
    assert (event.type, event.payload["team"], event.payload["file"]) == ("dispatch.sent", "ci", name)


def test_without_a_writer_the_tool_says_so_and_records_nothing(tmp_path):
    store = Store(tmp_path / "hub.db")
    ctx = ToolContext(store=store, scope="user:1", agent="general")
    with pytest.raises(RuntimeError, match="not set up"):
        dispatch.func(ctx, DispatchArgs(to="ci", subject="s", body="b"))
    assert recent_events(store, "user:1") == []
