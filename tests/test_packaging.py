"""The install: one namespace of our own, every subpackage shipped, no second copy of a module.

The repository folders hub/, agents/, memory/ and eval/ install as ``scopehub.*``. A bare
``import hub`` works by accident when Python runs from the checkout, and then loads a
second copy of the module: monkeypatches miss it and ``isinstance`` checks fail. Installed
next to openai-agents (which owns the top-level ``agents``), bare names break outright.
"""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
import tomllib
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE_FOLDERS = ("hub", "agents", "memory", "eval")
BARE = set(PACKAGE_FOLDERS)
# "module:attribute" strings (lazy click commands, entry points) name modules too.
_LAZY_TARGET = re.compile(r"^(?P<module>[A-Za-z_][\w.]*):[A-Za-z_]\w*$")


def _python_files() -> list[Path]:
    files: list[Path] = []
    for folder in (*PACKAGE_FOLDERS, "tests"):
        files.extend(p for p in (ROOT / folder).rglob("*.py") if "__pycache__" not in p.parts)
    return files


def _bare_imports(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            match = _LAZY_TARGET.match(node.value)
            names = [match["module"]] if match else []
            # `python -c "from hub.cli import main"` in a subprocess is a bare import too.
            code = node.value.lstrip()
            if code.startswith(("from ", "import ")):
                names += re.findall(r"\b(?:from|import)\s+([A-Za-z_][\w.]*)", code)
        else:
            continue
        found += [f"{path.relative_to(ROOT)}:{node.lineno}: {name}" for name in names if name.split(".")[0] in BARE]
    return found


def test_no_module_imports_a_bare_top_level_name():
    this_file = Path(__file__).resolve()
    offenders = [line for path in _python_files() if path != this_file for line in _bare_imports(path)]
    assert offenders == [], "import these through scopehub.*:\n" + "\n".join(offenders)


def test_the_guard_sees_a_bare_import(tmp_path):
    sample = ROOT / "tests" / "_bare_sample_for_guard.py"
    sample.write_text('import hub.cli\nLAZY = {"x": "agents.tasks:agent"}\nCODE = "from memory import Store"\n', encoding="utf-8")
    try:
        assert len(_bare_imports(sample)) == 3
    finally:
        sample.unlink()


def _declared_packages() -> set[str]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    return set(config["tool"]["setuptools"]["packages"])


def test_every_package_folder_is_listed_for_the_wheel():
    on_disk = {
        "scopehub." + ".".join(init.parent.relative_to(ROOT).parts)
        for folder in PACKAGE_FOLDERS
        for init in (ROOT / folder).rglob("__init__.py")
        if "__pycache__" not in init.parts
    }
    assert on_disk - _declared_packages() == set(), "add these to [tool.setuptools] packages in pyproject.toml"




def _stub_distribution(tmp_path: Path) -> Path:
    """A tiny distribution that owns the top-level ``agents`` package, as openai-agents does."""
    root = tmp_path / "stub_agents_sdk"
    (root / "agents").mkdir(parents=True)
    (root / "agents" / "__init__.py").write_text(
        "class Agent:\n    pass\n\n\nclass Runner:\n    pass\n", encoding="utf-8"
    )
    (root / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools"]\nbuild-backend = "setuptools.build_meta"\n\n'
        '[project]\nname = "stub-agents-sdk"\nversion = "1.0"\n\n[tool.setuptools]\npackages = ["agents"]\n',
        encoding="utf-8",
    )
    return root


def test_the_wheel_installs_beside_a_distribution_that_owns_agents(tmp_path):
    """Built from the checkout, installed into a fresh environment after a stub that owns
    the top-level ``agents`` (as openai-agents does): both import, and discovery finds our five."""
    pytest.importorskip("setuptools", minversion="77")
    wheels = tmp_path / "wheels"
    for source in (_stub_distribution(tmp_path), ROOT):
        subprocess.run(
            [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation", "--no-index", "-w", str(wheels), str(source)],
            check=True,
        )
    (our_wheel,) = wheels.glob("scopehub-*.whl")
    (their_wheel,) = wheels.glob("stub_agents_sdk-*.whl")
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=False)
    python = env_dir / "bin" / "python"
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], check=True, capture_output=True, text=True
    ).stdout.strip()
    for wheel in (their_wheel, our_wheel):
        subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-index", "--target", site, str(wheel)], check=True)
    # Our dependencies (pydantic, click...) come from this test's environment; its path is
    # added as a plain entry, so the checkout's editable-install finder is not loaded there.
    outer = [p for p in sys.path if p.endswith("site-packages")]
    Path(site, "outer_dependencies.pth").write_text("\n".join(outer) + "\n", encoding="utf-8")
    env = {"PATH": os.environ.get("PATH", ""), "LITELLM_LOCAL_MODEL_COST_MAP": "True", "HUB_DB": str(tmp_path / "hub.db")}
    probe = (
        "import agents, scopehub.agents as ours\n"
        "from agents import Agent, Runner\n"
        f"assert ours.__file__.startswith({site!r}), ours.__file__\n"
        "registry = ours.discover_agents()\n"
        "print(sorted(registry.names), registry.errors)\n"
        "from scopehub.hub.cli import main\n"
        "main(['agents', '--json'])\n"
    )
    result = subprocess.run([str(python), "-c", probe], capture_output=True, text=True, env=env, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[0] == "['general', 'inbox', 'notes', 'reminders', 'tasks'] {}"
    assert "declares no AgentSpec" not in result.stderr and "not loaded" not in result.stderr


def test_the_editable_build_prints_no_warning(tmp_path):
    """README's install is ``pip install -e``, and pip shows the build backend's warnings: the
    editable build raises none (setuptools' eight-line "Editable installation" notice looked
    like a fault to a newcomer), and the editable wheel is still made."""
    pytest.importorskip("setuptools", minversion="77")
    build = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["build-system"]
    hook = (
        "import importlib, sys, warnings\n"
        f"sys.path[:0] = {[str(ROOT / p) for p in build.get('backend-path', [])]!r}\n"
        f"backend = importlib.import_module({build['build-backend']!r})\n"
        "with warnings.catch_warnings(record=True) as shown:\n"
        f"    wheel = backend.build_editable({str(tmp_path)!r})\n"
        "print(wheel)\n"
        "print([f'{w.category.__name__}: {w.message}' for w in shown])\n"
    )
    result = subprocess.run([sys.executable, "-c", hook], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    wheel, shown = result.stdout.strip().splitlines()[-2:]
    assert wheel.startswith("scopehub-0.1.0-") and (tmp_path / wheel).exists()
    assert shown == "[]"
