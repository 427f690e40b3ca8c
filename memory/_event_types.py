"""The event-type registry: each type a pydantic payload model, a description and a one-line summary.

A plugin adds its own types with :func:`register_event_type`; :func:`validate_event_payload`
checks a payload against its type's model and refuses it with the field named
(:class:`InvalidEvent`). The registry is per process: :func:`scoped_event_types` gives a
block of code (a test) its own, restored when the block ends, so a type registered
there never leaks into the next.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from .errors import InvalidEvent, UnknownEventType

__all__ = [
    "SUMMARY_CHARS",
    "EventPayload",
    "EventType",
    "check_agent_name",
    "event_type",
    "event_types",
    "expand_event_types",
    "is_event_pattern",
    "register_event_type",
    "render_payload",
    "scoped_event_types",
    "validate_event_payload",
]

SUMMARY_CHARS = 120  # one awareness line: dense, never a paragraph
_TYPE_RE = re.compile(r"^[a-z][a-z0-9_]*(?:\.[a-z][a-z0-9_]*)+$")
_PATTERN_RE = re.compile(r"^(?:\*|[a-z][a-z0-9_]*(?:\.[a-z][a-z0-9_]*)*\.\*)$")




class EventPayload(BaseModel):
    """Base for event models: unknown fields are refused, payloads are immutable."""

    model_config = ConfigDict(extra="forbid", frozen=True)


Summary = Callable[[Any], str] | str | None


@dataclass(frozen=True)
class EventType:
    """A registered event type: its name, payload model, description and one-line summary."""

    name: str
    model: type[BaseModel]
    description: str
    summary: Summary = None

    def render(self, payload: Mapping[str, Any]) -> str:
        """The payload as one short line; never raises (awareness fails open)."""
        try:
            value = self.model.model_validate(payload)
            if callable(self.summary):
                line = self.summary(value)
            elif isinstance(self.summary, str):
                line = self.summary.format(**{name: getattr(value, name) for name in type(value).model_fields})
            else:
                line = _default_line(self.name, payload)
        except Exception:  # a stored payload from an older model, or a broken summary
            line = _default_line(self.name, payload)
        return _short(line)


_REGISTRY: dict[str, EventType] = {}


def _same_model(a: type[BaseModel], b: type[BaseModel]) -> bool:
    # A module loaded twice (a plugin file re-read) defines an equal class anew: same name
    # and same schema count as the same model.
    if a is b:
        return True
    return (a.__module__, a.__qualname__) == (b.__module__, b.__qualname__) and a.model_json_schema() == b.model_json_schema()


def register_event_type(name: str, model: type[BaseModel], *, description: str, summary: Summary = None) -> EventType:
    """Register an event type; returns it.

    ``summary`` renders a payload as one awareness line: a function of the validated
    model, or a ``str.format`` string over its fields. Registering the same model under
    the same name again is a no-op; another model under a taken name raises ValueError.
    The model must refuse extra fields (subclass :class:`EventPayload`).
    """
    if not isinstance(name, str) or not _TYPE_RE.match(name) or len(name) > 64:
        raise ValueError(f"event type name {name!r}: use dotted lower-case words, e.g. 'task.created'")
    if not (isinstance(model, type) and issubclass(model, BaseModel)):
        raise TypeError(f"event type {name}: the model must be a pydantic model class")
    if model.model_config.get("extra") != "forbid":
        raise ValueError(f"event type {name}: the model must forbid extra fields (subclass EventPayload)")
    if not description or not description.strip():
        raise ValueError(f"event type {name}: give a description")
    existing = _REGISTRY.get(name)
    if existing is not None:
        if _same_model(existing.model, model):
            return existing
        raise ValueError(
            f"event type {name!r} is already registered with model {existing.model.__qualname__}"
        )
    entry = EventType(name=name, model=model, description=description.strip(), summary=summary)
    _REGISTRY[name] = entry
    return entry


def event_types() -> list[EventType]:
    """Every registered event type, by name."""
    return [_REGISTRY[name] for name in sorted(_REGISTRY)]


def event_type(name: str) -> EventType | None:
    """The registered type of that name, if any."""
    return _REGISTRY.get(name)


def is_event_pattern(name: str) -> bool:
    """Whether ``name`` is a pattern (``reminder.*``, ``*``) rather than one type."""
    return bool(_PATTERN_RE.match(name))


def expand_event_types(names: Iterable[str]) -> list[str]:
    """Names with patterns (``reminder.*``, ``*``) replaced by the registered types they match.

    Plain names are kept as given, registered or not: the emitter may run in another
    process. Patterns match the types registered in this one.
    """
    out: set[str] = set()
    for name in [names] if isinstance(names, str) else names:  # one name, not its letters
        if name == "*":
            out.update(_REGISTRY)
        elif name.endswith(".*"):
            prefix = name[:-1]
            out.update(t for t in _REGISTRY if t.startswith(prefix))
        else:
            out.add(name)
    return sorted(out)


def _explain(type_name: str, exc: ValidationError) -> str:
    problems = []
    for error in exc.errors()[:5]:
        where = ".".join(str(part) for part in error.get("loc", ()))
        kind = error.get("type", "")
        if not where:
            problems.append("the payload must be an object of fields")
        elif kind == "missing":
            problems.append(f"field '{where}' is required")
        elif kind == "extra_forbidden":
            problems.append(f"field '{where}' is not allowed")
        else:
            given = repr(error.get("input"))
            given = given if len(given) <= 40 else given[:39] + "…"
            problems.append(f"field '{where}': {error.get('msg', 'invalid')} (got {given})")
    return f"event {type_name}: " + "; ".join(problems)


def validate_event_payload(type_name: str, payload: Mapping[str, Any] | BaseModel) -> dict[str, Any]:
    """The payload checked against its type's model, as JSON-ready data; raises InvalidEvent."""
    entry = _REGISTRY.get(type_name)
    if entry is None:
        known = ", ".join(sorted(_REGISTRY)) or "none"
        raise UnknownEventType(f"unknown event type {type_name!r}; registered types: {known}")
    if isinstance(payload, BaseModel):
        if not isinstance(payload, entry.model):
            raise InvalidEvent(f"event {type_name}: payload is a {type(payload).__name__}, not a {entry.model.__name__}")
        payload = payload.model_dump()
    try:
        value = entry.model.model_validate(payload)
    except ValidationError as exc:
        raise InvalidEvent(_explain(type_name, exc)) from exc
    return value.model_dump(mode="json")


@contextlib.contextmanager
def scoped_event_types() -> Iterator[None]:
    """Types registered inside the block are forgotten when it ends (the ones before it stay).

    For tests and tools that register types of their own: the registry is global to the
    process, and a type left behind would change what the next test sees.
    """
    saved = dict(_REGISTRY)
    try:
        yield
    finally:
        _REGISTRY.clear()
        _REGISTRY.update(saved)


def _short(line: str) -> str:
    line = " ".join(str(line).split())
    return line if len(line) <= SUMMARY_CHARS else line[: SUMMARY_CHARS - 1].rstrip() + "…"


def _default_line(type_name: str, payload: Mapping[str, Any]) -> str:
    return f"{type_name}: " + ", ".join(f"{key}={value}" for key, value in payload.items() if value not in (None, "", []))


def render_payload(type_name: str, payload: Mapping[str, Any]) -> str:
    """A payload of ``type_name`` as one short line (its type's summary, or field=value); never raises."""
    entry = _REGISTRY.get(type_name)
    if entry is None:
        return _short(_default_line(type_name, payload))
    return entry.render(payload)


def check_agent_name(what: str, name: str | None) -> None:
    """Refuse ``name`` unless it can name an agent (the emitter, a target, a cursor's owner)."""
    if not isinstance(name, str) or not name.strip() or len(name) > 64:
        raise InvalidEvent(f"{what} must be an agent name, not {name!r}")
