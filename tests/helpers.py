"""Small builders shared by tests."""

from __future__ import annotations

import sys
from collections.abc import Iterable, Mapping
from pathlib import Path

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
