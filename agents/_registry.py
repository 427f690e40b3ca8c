"""Agent discovery: the modules of this package, then the ``scopehub.agents`` entry points.

A module declares its agent as a module-level ``AgentSpec`` (conventionally ``agent``).
A module that fails to import or declares nothing is reported by name; the others load.
"""

from __future__ import annotations

import importlib
import importlib.util
import logging
import pkgutil
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from pathlib import Path
from types import ModuleType

from ._spec import AgentSpec
from ._team import channel_problems

__all__ = ["ENTRY_POINT_GROUP", "AgentRegistry", "discover_agents", "load_agent_file"]

ENTRY_POINT_GROUP = "scopehub.agents"
log = logging.getLogger(__name__)


@dataclass
class AgentRegistry:
    """The loaded agents by name, in load order, and the modules that failed."""

    agents: dict[str, AgentSpec] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)  # module or entry point -> reason

    def add(self, spec: AgentSpec, source: str) -> None:
        if spec.name in self.agents:
            self.errors[source] = f"agent name {spec.name!r} is already taken"
            return
        self.agents[spec.name] = spec

    def __getitem__(self, name: str) -> AgentSpec:
        return self.agents[name]

    def __contains__(self, name: object) -> bool:
        return name in self.agents

    def __iter__(self):
        return iter(self.agents.values())

    def __len__(self) -> int:
        return len(self.agents)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self.agents)

    def check_coordination(self) -> list[str]:
        """What the agents declare but does not exist: event types nobody registered, unknown collaborators.

        Event types are checked here, after every module has loaded, because a plugin may
        register its types after its spec is built. Problems are reported, not fatal: an
        emit of an unknown type fails on its own, with the type named.
        """
        problems: list[str] = []
        for spec in self.agents.values():
            problems.extend(spec.check_event_types())
            problems.extend(
                f"{spec.name}: collaborator {name!r} is not a loaded agent"
                for name in spec.collaborators
                if name not in self.agents or name == spec.name
            )
        problems.extend(channel_problems(self.agents.values()))
        return problems


def _specs_in(module: ModuleType) -> list[AgentSpec]:
    return [value for key, value in vars(module).items() if isinstance(value, AgentSpec) and not key.startswith("_")]


def _load_module(registry: AgentRegistry, module_name: str, loader) -> None:
    try:
        module = loader()
    except Exception as exc:  # any failure in a plugin must not stop the others
        registry.errors[module_name] = f"{type(exc).__name__}: {exc}"
        log.error("agent module %s failed to load: %s", module_name, exc, exc_info=True)
        return
    if isinstance(module, AgentSpec):
        registry.add(module, module_name)
        return
    specs = _specs_in(module) if isinstance(module, ModuleType) else []
    if not specs:
        registry.errors[module_name] = "declares no AgentSpec at module level"
        log.error("agent module %s declares no AgentSpec", module_name)
        return
    for spec in specs:
        registry.add(spec, module_name)


def load_agent_file(path: str | Path, registry: AgentRegistry | None = None) -> AgentRegistry:
    """Load the agents declared in one Python file (used for local plugins and tests)."""
    registry = registry if registry is not None else AgentRegistry()
    path = Path(path)
    name = f"agents_hub_local_{path.stem}"

    def load() -> ModuleType:
        spec = importlib.util.spec_from_file_location(name, path)
        if spec is None or spec.loader is None:
            raise ImportError(f"cannot load {path}")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
        return module

    _load_module(registry, str(path), load)
    return registry


def discover_agents(
    *,
    package: str = __package__ or "scopehub.agents",
    entry_point_group: str | None = ENTRY_POINT_GROUP,
    extra_files: Iterable[str | Path] = (),
) -> AgentRegistry:
    """Every agent: this package's public modules, then entry points, then extra files."""
    registry = AgentRegistry()
    root = importlib.import_module(package)
    for info in sorted(pkgutil.iter_modules(root.__path__), key=lambda m: m.name):
        if info.name.startswith("_"):
            continue
        qualified = f"{package}.{info.name}"
        _load_module(registry, qualified, lambda q=qualified: importlib.import_module(q))
    if entry_point_group:
        for ep in entry_points(group=entry_point_group):
            _load_module(registry, f"entry point {ep.name} ({ep.value})", ep.load)
    for path in extra_files:
        load_agent_file(path, registry)
    for problem in registry.check_coordination():
        log.warning("agent declaration: %s", problem)
    return registry
