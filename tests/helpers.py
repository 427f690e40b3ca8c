"""Small builders shared by tests."""

from __future__ import annotations

import sys
import threading
from collections.abc import Awaitable, Iterable, Mapping
from pathlib import Path
from typing import Any

from scopehub.agents import AgentRegistry, AgentSpec
from scopehub.memory import Message


def msg(id: int, agent: str | None, text: str = "", role: str = "user", scope: str = "user:1") -> Message:
    """A stored-looking message (ts follows id)."""
    return Message(id=id, scope=scope, role=role, text=text or f"message {id} for {agent}", ts=float(id), agent=agent)


def conversation(tags: Iterable[str | None], scope: str = "user:1") -> list[Message]:
    """Messages 1..n tagged as given, alternating user/agent roles."""
    return [msg(i, tag, role="user" if i % 2 else "agent", scope=scope) for i, tag in enumerate(tags, start=1)]


GENERAL = AgentSpec(name="general", description="small talk and help", instructions="Be nice.", examples=("hi", "how are you", "tell me a joke"))
TASKS = AgentSpec(
    name="tasks",
    description="to-do list: add, list and complete tasks",
    instructions="Manage tasks.",
    examples=("add buy milk to my tasks", "what is on my todo list"),
    keywords=("task", "todo"),
)


def registry_of(*specs: AgentSpec) -> AgentRegistry:
    """A registry of small test agents (general and tasks first)."""
    registry = AgentRegistry()
    for spec in (GENERAL, TASKS, *specs):
        registry.add(spec, "test")
    return registry


# -- child processes run this checkout ----------------------------------------------------------

ROOT = Path(__file__).resolve().parent.parent  # the checkout under test
CHECKOUT_MISMATCH = 97  # the exit status of a child that imported scopehub from elsewhere

_GUARD = f"""
import pathlib as _pathlib, sys as _sys
import scopehub.hub as _hub
_root, _here = {str(ROOT)!r}, _pathlib.Path(_hub.__file__).resolve()
if not _here.is_relative_to(_root):
    _sys.stderr.write(f"scopehub.hub imported from {{_here}}, not from the checkout {{_root}}\\n")
    _sys.exit({CHECKOUT_MISMATCH})
"""


def checkout_env(tmp_path: Path, env: Mapping[str, str]) -> dict[str, str]:
    """``env`` plus a PYTHONPATH that makes ``import scopehub`` find this checkout first.

    The repository's folders install as ``scopehub.*`` (package-dir), so the checkout is
    importable only through a directory holding a ``scopehub`` link to it; without one a
    child would run whatever the interpreter has installed.
    """
    link = tmp_path / "checkout-path" / "scopehub"
    if not link.exists():
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(ROOT, target_is_directory=True)
    return {**env, "PYTHONPATH": str(link.parent)}


def checkout_python(code: str) -> list[str]:
    """``python -c code`` that first proves it imports this checkout (else exits CHECKOUT_MISMATCH)."""
    return [sys.executable, "-c", _GUARD + code]


class StoreThreads:
    """Which threads a store's methods ran on while :meth:`watch` awaited something, with the
    store's work sent to the database threads as on PostgreSQL (``scopehub.hub.dbwork``):
    what a test needs to show that background work never holds the event loop."""

    def __init__(self, store: Any, monkeypatch: Any, names: Iterable[str] = ("query", "transaction", "window", "get", "record_call")) -> None:
        from scopehub.hub import dbwork

        monkeypatch.setattr(dbwork, "offloads", lambda _store: True)  # this SQLite store as if it were PostgreSQL
        self.seen: dict[str, set[int]] = {}
        self.steps: list[str] = []  # the store steps (one thread hop each) run while watching, by name
        in_session = dbwork._in_session

        def counted(store: Any, work: Any, *args: Any) -> Any:
            if self._watching:
                self.steps.append(getattr(work, "__name__", None) or getattr(getattr(work, "func", None), "__name__", repr(work)))
            return in_session(store, work, *args)

        monkeypatch.setattr(dbwork, "_in_session", counted)
        self.loop_thread: int | None = None
        self._watching = False
        for name in names:
            method = getattr(store, name)

            def spied(*args: Any, _method: Any = method, _name: str = name, **kwargs: Any) -> Any:
                if self._watching:
                    self.seen.setdefault(_name, set()).add(threading.get_ident())
                return _method(*args, **kwargs)

            monkeypatch.setattr(store, name, spied)

    async def watch(self, awaitable: Awaitable[Any]) -> Any:
        """Await ``awaitable`` and note the threads of the store calls it made."""
        self.loop_thread, self._watching = threading.get_ident(), True
        try:
            return await awaitable
        finally:
            self._watching = False

    def on_the_loop(self) -> set[str]:
        """The methods called on the event loop's thread while watching."""
        return {name for name, threads in self.seen.items() if self.loop_thread in threads}
