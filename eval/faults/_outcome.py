"""What a fault scenario verified and what went wrong, in its own units."""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

log = logging.getLogger(__name__)

COUNTS = ("lost", "duplicated", "leaked", "crashed")
# What the scenarios verify, each in its own unit (Outcome.verified).
KILLS_SURVIVED = "SIGKILLs survived"
PRESENT_ONCE = "messages verified present exactly once"
ANSWERED_ONCE = "messages verified stored and answered exactly once"
IN_ORDER = "messages answered once, in order"
WRITER_PRESENT = "second writer's messages verified present"
FIRST_OPENS = "simultaneous first opens"
FAULTS_ANSWERED = "model faults answered"
HOSTILE_TRIED = "hostile texts tried"
HUGE_KEPT = "huge messages stored whole, trimmed for the model"
SCOPE_PAIRS = "scope pairs checked"
ITEMS_UNCHANGED = "other scopes' items attacked, unchanged"
FAILURES_ANSWERED = "failures answered and logged"
_MAX_NOTES = 30  # per scenario: enough to diagnose, short enough to read

# -- outcome ------------------------------------------------------------------------------------


@dataclass
class Outcome:
    """What one scenario verified and what went wrong (see the module docstring for the counts)."""

    name: str
    verified: dict[str, int] = field(default_factory=dict)  # unit -> how many were checked and right
    lost: int = 0
    duplicated: int = 0
    leaked: int = 0
    crashed: int = 0
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)
    details: dict[str, Any] = field(default_factory=dict)  # for tests; not in the JSON
    dropped_notes: int = 0

    @property
    def ok(self) -> bool:
        return not any(getattr(self, name) for name in COUNTS)

    @property
    def failures(self) -> int:
        """Everything that went wrong so far (to tell whether one check added any)."""
        return sum(getattr(self, name) for name in COUNTS)

    def verify(self, unit: str, n: int = 1) -> None:
        """Count ``n`` things of ``unit`` checked and found right."""
        self.verified[unit] = self.verified.get(unit, 0) + n

    def verified_text(self) -> str:
        return "; ".join(f"{n:,} {unit}" for unit, n in self.verified.items()) or "nothing"

    def note(self, text: str) -> None:
        if len(self.notes) < _MAX_NOTES:
            self.notes.append(text)
        else:
            self.dropped_notes += 1

    def fail(self, count: str, text: str, n: int = 1) -> None:
        """Count ``n`` failures of kind ``count`` and say why."""
        setattr(self, count, getattr(self, count) + n)
        self.note(f"{count}: {text}")

    def as_dict(self) -> dict[str, Any]:
        notes = list(self.notes)
        if self.dropped_notes:
            notes.append(f"... and {self.dropped_notes} more notes")
        return {
            "verified": dict(self.verified),
            **{name: getattr(self, name) for name in COUNTS},
            "seconds": round(self.seconds, 2),
            "notes": notes,
        }


@contextlib.contextmanager
def timed(outcome: Outcome) -> Iterator[Outcome]:
    started = time.perf_counter()
    try:
        yield outcome
    finally:
        outcome.seconds += time.perf_counter() - started



@dataclass(frozen=True)
class Scenario:
    """A fault scenario as the suite runs it: its function and its two sizes (the full run's, and --quick's)."""

    run: Callable[..., Outcome]
    heavy: dict[str, Any] = field(default_factory=dict)
    quick: dict[str, Any] = field(default_factory=dict)
