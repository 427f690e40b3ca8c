"""No import circle among scopehub's modules.

The graph is read from the source, not from a running interpreter: every ``import`` and
``from ... import`` of a ``scopehub`` module (relative ones resolved), at module level and
inside functions alike, except those under ``if TYPE_CHECKING:`` (never executed). An
import inside a function that closes a circle still ties the two modules together; the
remedy is to move the shared piece into a module below both (as ``hub/wording.py`` and
``eval/hub_bench_model.py`` were), not to hide the import in a function. Imports of
third-party packages that the hub delays for start-up time (litellm, sqlite-utils) are not
edges of this graph and are unaffected. ``importlib.import_module`` and the CLI's
``"module:attribute"`` strings are not followed.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE_FOLDERS = ("hub", "agents", "memory", "eval")
NAMESPACE = "scopehub"


def _modules(root: Path) -> dict[str, tuple[Path, bool]]:
    """Dotted name -> (file, is a package's ``__init__``) for every module of the namespace."""
    found: dict[str, tuple[Path, bool]] = {}
    for folder in PACKAGE_FOLDERS:
        for path in (root / folder).rglob("*.py"):
            if "__pycache__" in path.parts:
                continue
            parts = list(path.relative_to(root).with_suffix("").parts)
            is_package = parts[-1] == "__init__"
            if is_package:
                parts.pop()
            found[".".join((NAMESPACE, *parts))] = (path, is_package)
    return found


def _is_type_checking(node: ast.If) -> bool:
    return "TYPE_CHECKING" in ast.unparse(node.test)


def _imports(tree: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    """Every import statement, skipping the bodies of ``if TYPE_CHECKING:``."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.If) and _is_type_checking(node):
            yield from (n for child in node.orelse for n in _imports_of(child))
            continue
        yield from _imports_of(node)


def _imports_of(node: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    if isinstance(node, ast.Import | ast.ImportFrom):
        yield node
    else:
        yield from _imports(node)


def import_edges(root: Path) -> dict[str, dict[str, int]]:
    """Module -> {module it imports: line of the first such import}."""
    modules = _modules(root)

    def known(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, dict[str, int]] = {}
    for name, (path, is_package) in modules.items():
        package = name if is_package else name.rpartition(".")[0]
        edges: dict[str, int] = {}
        for node in _imports(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            else:
                if node.level:
                    base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                    source = ".".join([*base, *([node.module] if node.module else [])])
                else:
                    source = node.module or ""
                # `from pkg import sub` imports the submodule when there is one.
                targets = [f"{source}.{alias.name}" if f"{source}.{alias.name}" in modules else source for alias in node.names]
            for target in targets:
                resolved = known(target) if target.startswith(NAMESPACE + ".") else None
                if resolved and resolved != name:
                    edges.setdefault(resolved, node.lineno)
        graph[name] = edges
    return graph


def circles(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in graph:
        if start in index:
            continue
        work = [(start, iter(graph[start]))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, successors = work[-1]
            for successor in successors:
                if successor not in index:
                    index[successor] = low[successor] = len(index)
                    stack.append(successor)
                    on_stack.add(successor)
                    work.append((successor, iter(graph.get(successor, {}))))
                    break
                if successor in on_stack:
                    low[node] = min(low[node], index[successor])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
    return found


def _describe(component: list[str], graph: dict[str, dict[str, int]]) -> str:
    members = set(component)
    ties = [f"  {a} -> {b} (line {line})" for a in component for b, line in graph[a].items() if b in members]
    return " <-> ".join(component) + "\n" + "\n".join(ties)


def test_scopehub_has_no_import_circle():
    graph = import_edges(ROOT)
    assert len(graph) > 100  # the whole namespace was read, not an empty folder
    found = circles(graph)
    assert found == [], "import circles (move the shared piece into a module below both):\n" + "\n".join(
        _describe(component, graph) for component in found
    )


def _write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


def test_a_circle_through_a_function_level_import_is_found(tmp_path):
    _write(
        tmp_path,
        {
            "hub/__init__.py": "",
            "hub/a.py": "from scopehub.hub.b import thing\n",
            "hub/b.py": "def thing():\n    from . import a\n    return a\n",
            "memory/__init__.py": "",
        },
    )
    assert circles(import_edges(tmp_path)) == [["scopehub.hub.a", "scopehub.hub.b"]]


def test_type_checking_imports_and_a_chain_are_not_circles(tmp_path):
    _write(
        tmp_path,
        {
            "hub/__init__.py": "from .a import x\n",
            "hub/a.py": "from typing import TYPE_CHECKING\nfrom scopehub.memory import y\nif TYPE_CHECKING:\n    from scopehub.hub import b\nx = 1\n",
            "hub/b.py": "from .a import x\n",
            "memory/__init__.py": "y = 2\n",
        },
    )
    graph = import_edges(tmp_path)
    assert graph["scopehub.hub.a"] == {"scopehub.memory": 2}
    assert graph["scopehub.hub.b"] == {"scopehub.hub.a": 1}
    assert circles(graph) == []
