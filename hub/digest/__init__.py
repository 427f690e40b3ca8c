"""The digest of older history and reflection into knowledge, off the request path.

:mod:`.text` splits, scores and checks text (pure); :mod:`.extractive` picks salient
sentences with no model; :mod:`.compaction` holds the model's prompts and checks its
lines; :mod:`.render` is the section an agent reads; :mod:`.service` wires it into the
hub as :class:`DigestKeeper`; :mod:`.reflection` distills older episodes into
knowledge fragments (:class:`Reflector`).
"""

from scopehub.hub.digest.reflection import Fragment, Reflector, ReflectReport, extractive_fragments
from scopehub.hub.digest.render import DIGEST_HEADER, fit_lines, render_digest, render_lines
from scopehub.hub.digest.service import (
    BACKGROUND_CLAIMS,
    DIGEST_CLAIM,
    REFLECT_CLAIM,
    CompactionReport,
    DigestKeeper,
    DigestSection,
    resolve_mode,
)
from scopehub.hub.digest.text import Salience, SourceText, untraceable

__all__ = [
    "BACKGROUND_CLAIMS",
    "DIGEST_CLAIM",
    "DIGEST_HEADER",
    "REFLECT_CLAIM",
    "CompactionReport",
    "DigestKeeper",
    "DigestSection",
    "Fragment",
    "ReflectReport",
    "Reflector",
    "Salience",
    "SourceText",
    "extractive_fragments",
    "fit_lines",
    "render_digest",
    "render_lines",
    "resolve_mode",
    "untraceable",
]
