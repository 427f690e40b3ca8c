"""The embedded model's job, narrowed: one small decision per call.

A 135M-parameter model offered every tool of an agent and the whole recent history
picks the wrong tool and copies earlier replies. So for each step of a reply the
planner decides what is left for the model, from the tool schemas the hub offers and
the example utterances the tools declare (:class:`Demo`):

1. **Which tool** (zero tokens): a naive-Bayes classifier over each offered tool's
   examples, name and description, plus an "answer in words" class for small talk.
2. **Its arguments**: only when the tool has required arguments, the model writes them
   under a grammar that admits exactly that tool's arguments, with strings limited to
   runs of words from the person's message (and the last reply when the message points
   back at it: "put *that* on my tasks") and integers to the numbers written there. It
   sees a handful of demonstrations, the last reply and the message, not the history.
   A tool without required arguments (``list_tasks``, ``keep_email``) costs no model call.
3. **The reply**: after a tool ran, its result is the reply (a small model summarising
   it is where wrong numbers come from). A call that failed with optional arguments the
   model filled in is tried once more with the required ones only.
4. **Words** (small talk, questions): the model answers from the agent's persona, the
   facts, the last exchange and the message; an answer that repeats an earlier message
   word for word is refused and written again without the last exchange.

Everything here is pure (no llama.cpp, no I/O): the adapter in :mod:`.local` runs the
prompts the planner writes. Prompts use SmolLM2's ChatML template.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from scopehub.hub.models.templates import CHATML, Template
from scopehub.hub.routing.classifier import AgentProfile, LocalClassifier

__all__ = [
    "ANSWER",
    "Call",
    "Demo",
    "Generate",
    "Planner",
    "Reply",
    "Turn",
    "arguments_grammar",
    "chatml",
    "is_copy",
    "prefill",
    "split_turn",
]

ANSWER = "(answer)"  # the pseudo-tool "reply in words"; not a valid tool name, so it cannot clash
MAX_SOURCE_WORDS = 400  # words of message + last reply a string argument may be built from
MAX_DEMOS = 4  # demonstrations per arguments prompt
EARLIER_CHARS = 500  # the last reply as the model sees it
MESSAGE_CHARS = 1500  # the current message as the model sees it (long emails need no model call)
ARGUMENT_TOKENS = 96
TOOL_ODDS = 2.0  # how much likelier than a reply in words a tool must be to be called
ANSWER_TOKENS = 40
# Utterances of the "reply in words" class: greetings, thanks, questions about the bot, and
# what people tell about themselves (facts are learnt from it after the reply, not by a tool).
IN_WORDS = (
    "hi", "hello there", "good morning", "hey, how are you", "thanks", "thank you so much", "great, thanks",
    "ok cool", "what can you do", "who are you", "tell me a joke", "bye", "help me please", "nice",
    "my name is Alex", "I live in Berlin", "my email is anna@example.com", "I'm vegetarian",
    "my brother works at a bank", "I prefer window seats",
)  # fmt: skip
# Short demonstrations ahead of the conversation: a 135M model answers at the length it is shown.
ANSWER_DEMOS = (
    ("hi", "Hello! How can I help you today?"),
    ("thanks!", "You're welcome!"),
    ("I live in Berlin", "Thanks for telling me."),
)
# Words that point back at the last reply: "put *that* on my tasks", "tick *it* off".
# "that's all", "it is fine" are no pointers; "that email", "is that true" are.
_BACK_REFERENCE = re.compile(
    r"\b(?:(?:that|it)(?!['’]s\b| is\b)|this|those|these|them|above|same|last one|previous)\b", re.I
)
_NUMBER = re.compile(r"(?<![\w.])#?(\d{1,9})(?![\w.]*\d)")
_TRAILING_PUNCTUATION = ".,;:!?)]}\"'"
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
_LEADING_PUNCTUATION = "([{\"'"


@dataclass(frozen=True, slots=True)
class Demo:
    """An utterance that asks for a tool; with ``arguments`` it demonstrates them."""

    text: str
    arguments: Mapping[str, Any] | None = None
    earlier: str = ""


@dataclass(frozen=True, slots=True)
class Turn:
    """The provider messages of one agent call, taken apart."""

    persona: str  # the first paragraph of the system message
    facts: str  # the facts block inside the system message, if any
    history: tuple[dict[str, str], ...]  # earlier user/assistant turns, oldest first
    message: str  # the person's current message
    steps: tuple[dict[str, Any], ...]  # tool calls and results of this reply so far

    @property
    def last_reply(self) -> str:
        """The newest earlier assistant reply ('' when none)."""
        for item in reversed(self.history):
            if item["role"] == "assistant":
                return item["content"]
        return ""

    @property
    def last_exchange(self) -> tuple[dict[str, str], ...]:
        """The newest earlier user turn and the reply after it."""
        for index in range(len(self.history) - 1, 0, -1):
            if self.history[index]["role"] == "assistant" and self.history[index - 1]["role"] == "user":
                return self.history[index - 1 : index + 1]
        return ()


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
    """Run the model on ``prompt`` (ChatML text) under ``grammar`` (GBNF text), else under
    the JSON-schema ``schema``, else unconstrained.

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


# --------------------------------------------------------------------------- messages


def _text(content: Any) -> str:
    return content if isinstance(content, str) else ("" if content is None else json.dumps(content))


def split_turn(messages: Sequence[Mapping[str, Any]], facts_header: str = "Facts about") -> Turn:
    """Persona, facts, history, current message and this reply's tool steps.

    Tool steps are the assistant tool calls and tool results after the person's message;
    a user message right after a tool result is the hub talking (a step-limit note),
    not the person, and belongs to the steps.
    """
    system = "\n\n".join(_text(m.get("content")) for m in messages if m.get("role") == "system")
    rest = [m for m in messages if m.get("role") != "system"]
    index = len(rest) - 1
    while index >= 0:
        item = rest[index]
        role = item.get("role")
        if role == "tool" or (role == "assistant" and item.get("tool_calls")):
            index -= 1
            continue
        if role == "user" and index > 0 and rest[index - 1].get("role") == "tool":
            index -= 1
            continue
        break
    current = _text(rest[index].get("content")) if index >= 0 and rest[index].get("role") == "user" else ""
    history = tuple(
        {"role": str(m.get("role")), "content": _text(m.get("content"))}
        for m in rest[: max(index, 0)]
        if m.get("role") in ("user", "assistant") and not m.get("tool_calls")
    )
    paragraphs = [part.strip() for part in system.split("\n\n") if part.strip()]
    persona = paragraphs[0] if paragraphs else ""
    facts = next((part for part in paragraphs if part.startswith(facts_header)), "")
    return Turn(persona=persona, facts=facts, history=history, message=current, steps=tuple(rest[index + 1 :]))


def chatml(system: str, turns: Iterable[tuple[str, str]]) -> str:
    """A ChatML prompt (SmolLM2's template) ending where the assistant writes."""
    parts = [f"<|im_start|>system\n{system}<|im_end|>\n"] if system else []
    parts.extend(f"<|im_start|>{role}\n{content}<|im_end|>\n" for role, content in turns)
    parts.append("<|im_start|>assistant\n")
    return "".join(parts)


def _clip(text: str, limit: int) -> str:
    text = text.strip()
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _normal(text: str) -> str:
    """Lower case, words only; dots and colons stay inside words (e-mail addresses, 09:30)."""
    text = re.sub(r"[.,!?;:]+(?=\s|$)", " ", text.casefold())
    return " ".join(re.sub(r"[^\w@.#:/-]+", " ", text).split())


def is_copy(reply: str, earlier: Iterable[str]) -> bool:
    """Whether ``reply`` repeats one of the ``earlier`` texts, or a run of three or more of
    its words, word for word (case and punctuation aside)."""
    probe = _normal(reply)
    if not probe:
        return False
    for text in earlier:
        seen = _normal(text) if text else ""
        if probe == seen or (len(probe.split()) >= 3 and f" {probe} " in f" {seen} "):
            return True
    return False


# --------------------------------------------------------------------------- grammars


def _gbnf_literal(text: str) -> str:
    """A GBNF string literal matching ``text`` exactly."""
    escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\r", "\\r").replace("\t", "\\t")
    return f'"{escaped}"'


def _json_literal(value: Any) -> str:
    """A GBNF literal for ``value`` written as JSON."""
    return _gbnf_literal(json.dumps(value, ensure_ascii=False))


def _in_json_string(word: str) -> str:
    """``word`` as it appears inside a JSON string (quotes and backslashes escaped)."""
    return json.dumps(word, ensure_ascii=False)[1:-1]


def source_words(source: str) -> list[str]:
    """The words a string argument may be built from, in order (at most MAX_SOURCE_WORDS)."""
    words = []
    for raw in source.split():
        word = raw.lstrip(_LEADING_PUNCTUATION) or raw
        if word:
            words.append(word)
    return words[-MAX_SOURCE_WORDS:] if len(words) > MAX_SOURCE_WORDS else words


def _span_rules(name: str, words: Sequence[str]) -> list[str]:
    """Rules for a JSON string that is a run of consecutive ``words``.

    One rule per distinct word, followed by any word that follows it somewhere in the
    source: the model may start anywhere and stop after any word (dropping the word's
    trailing punctuation when it stops there), but cannot write a word that is not there.
    """
    index: dict[str, int] = {}
    followers: dict[int, list[int]] = {}
    ends: dict[int, set[str]] = {}
    order: list[int] = []
    for word in words:
        if word not in index:
            index[word] = len(index)
    for position, word in enumerate(words):
        node = index[word]
        if node not in order:
            order.append(node)
        ends.setdefault(node, {word, word.rstrip(_TRAILING_PUNCTUATION) or word})
        if position + 1 < len(words):
            nxt = index[words[position + 1]]
            followers.setdefault(node, [])
            if nxt not in followers[node]:
                followers[node].append(nxt)
    by_node = {node: word for word, node in index.items()}
    rules = [f'{name} ::= "\\"" ( {" | ".join(f"{name}-{node}" for node in order)} ) "\\""']
    for node in order:
        word = by_node[node]
        options = []
        nexts = followers.get(node, [])
        if nexts:
            options.append(f'{_gbnf_literal(_in_json_string(word))} " " ( {" | ".join(f"{name}-{n}" for n in nexts)} )')
        options.extend(_gbnf_literal(_in_json_string(end)) for end in sorted(ends[node]))
        rules.append(f"{name}-{node} ::= " + " | ".join(options))
    return rules


def _numbers(source: str) -> list[str]:
    found: list[str] = []
    for match in _NUMBER.finditer(source):
        value = str(int(match[1]))
        if value not in found:
            found.append(value)
    return found


def _value_rules(name: str, schema: Mapping[str, Any], words: Sequence[str], source: str) -> list[str] | None:
    """Rules for one argument value, or None for a shape this grammar does not cover."""
    if "enum" in schema:
        values = list(schema["enum"])
        return [f"{name} ::= " + " | ".join(_json_literal(value) for value in values)] if values else None
    if "const" in schema:
        return [f"{name} ::= {_json_literal(schema['const'])}"]
    kind = schema.get("type")
    if kind == "string":
        if words:
            return _span_rules(name, words)
        return [f'{name} ::= "\\"" [^"\\\\\\n]{{1,80}} "\\""']
    if kind in ("integer", "number"):
        numbers = _numbers(source)
        if numbers:
            return [f"{name} ::= " + " | ".join(_gbnf_literal(n) for n in numbers)]
        return [f'{name} ::= "-"? [0-9]{{1,9}}']
    if kind == "boolean":
        return [f'{name} ::= "true" | "false"']
    return None


def arguments_grammar(
    parameters: Mapping[str, Any], source: str, *, optional: bool = True, prefilled: bool = False
) -> str | None:
    """A GBNF grammar for the JSON arguments of one tool, written from ``source``.

    Required arguments come first and must be given; optional ones (when ``optional``)
    may follow in schema order. Strings are runs of ``source``'s words, integers are
    numbers written in ``source`` (any integer when it has none). ``None`` when an
    argument has a shape this grammar does not cover (the caller falls back to the
    JSON-schema grammar). With ``prefilled``, the prompt already ends with
    :func:`prefill` (``{"<first required>": ``) and the grammar covers the rest: forced
    tokens cost a forward pass each, so the model is not made to write them.
    """
    properties = parameters.get("properties") or {}
    required = [name for name in parameters.get("required") or () if name in properties]
    optional_names = [name for name in properties if name not in required] if optional else []
    words = source_words(source)
    rules: list[str] = []
    members: list[tuple[str, str, bool]] = []
    for position, prop in enumerate([*required, *optional_names]):
        value = f"v{position}"
        schema = properties[prop] if isinstance(properties[prop], Mapping) else {}
        if prop not in required and schema.get("type") in ("integer", "number") and not _numbers(source):
            continue  # an optional number nobody wrote (an email id) could only be invented
        value_rules = _value_rules(value, schema, words, source)
        if value_rules is None:
            if prop in required:
                return None
            continue
        rules.extend(value_rules)
        members.append((prop, value, prop in required))
    if not members:
        return 'root ::= "{}"'
    body: list[str] = []
    first = True
    for prop, value, needed in members:
        head = f'{_gbnf_literal(json.dumps(prop))} ": " {value}'
        if first and needed:
            body.append(value if prefilled else head)
            first = False
        elif needed:
            body.append(f'", " {head}')
        elif first:
            # No required argument before it: the optional ones form their own list.
            body.append(f"( {head} )?")
            first = False
        else:
            body.append(f'( ", " {head} )?')
    opening = "" if prefilled and members[0][2] else '"{" '
    return "\n".join([f'root ::= {opening}{" ".join(body)} "}}"', *rules])


def prefill(parameters: Mapping[str, Any]) -> str:
    """What an arguments answer starts with for sure: ``{"<first required argument>": ``."""
    properties = parameters.get("properties") or {}
    required = [name for name in parameters.get("required") or () if name in properties]
    return f"{{{json.dumps(required[0])}: " if required else ""


# --------------------------------------------------------------------------- the planner


def _function(tool: Mapping[str, Any]) -> Mapping[str, Any]:
    inner = tool.get("function", tool)
    return inner if isinstance(inner, Mapping) else {}


def _parameters(function: Mapping[str, Any]) -> Mapping[str, Any]:
    params = function.get("parameters")
    return params if isinstance(params, Mapping) else {}


def _required(function: Mapping[str, Any]) -> list[str]:
    params = _parameters(function)
    properties = params.get("properties") or {}
    return [name for name in params.get("required") or () if name in properties]


def _signature(function: Mapping[str, Any]) -> str:
    params = _parameters(function)
    required = set(params.get("required") or ())
    names = [name if name in required else f"{name}?" for name in params.get("properties") or {}]
    return f"{function.get('name')}({', '.join(names)})"


@dataclass
class Planner:
    """Decides each step of an embedded-model reply (see the module docstring)."""

    catalogue: dict[str, tuple[Demo, ...]] = field(default_factory=dict)
    about: str = ""  # one sentence on what the whole assistant does, for answers in words
    template: Template = CHATML  # the wire format of the weights that run the prompts
    _classifiers: dict[tuple[str, ...], LocalClassifier] = field(default_factory=dict, repr=False)

    def learn(self, catalogue: Mapping[str, Iterable[Demo]], about: str = "") -> None:
        """Add (or replace) the example utterances of tools, by tool name."""
        for name, demos in catalogue.items():
            self.catalogue[name] = tuple(demos)
        if about:
            self.about = about
        self._classifiers.clear()

    # -- 1. which tool ---------------------------------------------------------------
    def _classifier(self, functions: Sequence[Mapping[str, Any]]) -> LocalClassifier:
        key = tuple(str(f.get("name")) for f in functions)
        classifier = self._classifiers.get(key)
        if classifier is None:
            profiles = [
                AgentProfile(
                    name=str(function.get("name")),
                    description=str(function.get("description") or ""),
                    examples=tuple(demo.text for demo in self.catalogue.get(str(function.get("name")), ())),
                    keywords=tuple(str(function.get("name")).split("_")),
                )
                for function in functions
            ]
            profiles.append(AgentProfile(name=ANSWER, description="greetings, thanks, questions about you", examples=IN_WORDS))
            classifier = LocalClassifier(profiles, default_agent=ANSWER)
            self._classifiers[key] = classifier
        return classifier

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
        best = max(scores, key=lambda name: scores[name])
        # A tool acts (it may store something): it must be clearly likelier than words.
        return best if scores[best] >= TOOL_ODDS * scores.get(ANSWER, 0.0) else ANSWER

    # -- the next step -----------------------------------------------------------------
    def plan(self, messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]]) -> Step:
        """What to do next for this agent call."""
        turn = split_turn(messages)
        offered = {str(f.get("name")): f for f in (_function(t) for t in tools) if f.get("name")}
        if turn.steps:
            return self._after_tool(turn, offered)
        choice = self.choose(turn.message, tools)
        if choice == ANSWER:
            return self._answer(turn)
        return self._call(turn, offered[choice])

    # -- 2. arguments --------------------------------------------------------------------
    def _call(self, turn: Turn, function: Mapping[str, Any]) -> Step:
        name = str(function.get("name"))
        if not _required(function):
            return Call(name, {})
        message = _clip(turn.message, MESSAGE_CHARS)
        only = _single_numbers(function, message)
        if only is not None:
            return Call(name, only)  # "mark task 1 as done": the grammar would admit nothing else
        earlier = ""
        if turn.last_reply and (_BACK_REFERENCE.search(message) or self._needs_numbers(function, message)):
            earlier = _clip(turn.last_reply, EARLIER_CHARS)
        source = f"{earlier}\n{message}" if earlier else message
        parameters = _parameters(function)
        grammar = arguments_grammar(parameters, source, prefilled=True)
        # A shape the span grammar does not cover: the tool's JSON schema constrains it instead.
        schema = None if grammar is not None else parameters
        start = prefill(parameters) if grammar is not None else ""
        prompt = self.template.render(self._arguments_system(function), [("user", self._arguments_input(message, earlier))])

        framing = self._framing_words(name)

        def finish(text: str) -> Step:
            arguments = _parse_object(start + text)
            if arguments is None or any(key not in arguments for key in _required(function)):
                return Reply("Sorry, I could not work out the details of that. Could you say it in other words?")
            return Call(name, _tidy_arguments(arguments, _required(function), framing))

        return Generate(prompt=prompt, grammar=grammar, max_tokens=ARGUMENT_TOKENS, finish=finish, schema=schema, prefill=start)

    def _framing_words(self, name: str) -> frozenset[str]:
        """Words the tool's demonstrations say around their arguments but never inside them
        ("add ... to my todo list"): a value the model starts or ends with them is trimmed."""
        around: set[str] = set()
        inside: set[str] = set()
        for demo in self.catalogue.get(name, ()):
            if demo.arguments is None:
                continue
            around.update(_words(demo.text))
            for value in demo.arguments.values():
                inside.update(_words(str(value)))
        return frozenset(around - inside)

    @staticmethod
    def _needs_numbers(function: Mapping[str, Any], message: str) -> bool:
        """A required number (a task id) the message does not write: it refers to the last reply."""
        params = _parameters(function)
        properties = params.get("properties") or {}
        wants_number = any(
            isinstance(properties.get(name), Mapping) and properties[name].get("type") in ("integer", "number")
            for name in _required(function)
        )
        return wants_number and not _numbers(message)

    def _arguments_system(self, function: Mapping[str, Any]) -> str:
        """Instruction and demonstrations: stable per tool, so llama.cpp reuses its cached prefix."""
        name = str(function.get("name"))
        lines = [
            f"Write the JSON arguments of {_signature(function)}: {function.get('description') or ''}".rstrip(": "),
            "Copy the words from the message; leave out what it does not say.",
        ]
        demos = [demo for demo in self.catalogue.get(name, ()) if demo.arguments is not None][:MAX_DEMOS]
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
        head = f"Earlier reply: {earlier}\n" if earlier else ""
        return f"{head}Message: {message}\nArguments:"

    # -- 3. after a tool ran -------------------------------------------------------------
    def _after_tool(self, turn: Turn, offered: Mapping[str, Mapping[str, Any]]) -> Step:
        results = [step for step in turn.steps if step.get("role") == "tool"]
        calls = [call for step in turn.steps for call in step.get("tool_calls") or ()]
        if not results or not calls:
            return Reply("Done.")
        last_call = calls[-1].get("function", {})
        result = _text(results[-1].get("content")).strip()
        name = str(last_call.get("name"))
        if result.startswith("error:") and len(calls) == 1 and name in offered:
            try:
                arguments = json.loads(last_call.get("arguments") or "{}")
            except ValueError:
                arguments = {}
            required = _required(offered[name])
            if isinstance(arguments, dict) and set(arguments) - set(required):
                # An optional argument the model filled in (a due date of "milk") made it fail.
                return Call(name, {key: value for key, value in arguments.items() if key in required})
        return Reply(_result_reply(name, result))

    # -- 4. words ------------------------------------------------------------------------
    def _answer(self, turn: Turn) -> Step:
        # Only the conversation counts: a canned demonstration reply may be said again.
        earlier_texts = [item["content"] for item in turn.history] + [turn.message]
        system = self._answer_system(turn)
        message = _clip(turn.message, MESSAGE_CHARS)
        exchange: list[tuple[str, str]] = []
        if _BACK_REFERENCE.search(message):
            # The last exchange only when the message points at it: otherwise it is what gets copied.
            exchange = [(item["role"], _clip(item["content"], EARLIER_CHARS)) for item in turn.last_exchange]
        demos = [turn for said, answered in ANSWER_DEMOS for turn in (("user", said), ("assistant", answered))]
        first = self.template.render(system, [*demos, *exchange, ("user", message)])
        alone = self.template.render(system, [*demos, ("user", message)])
        words = {"grammar": None, "max_tokens": ANSWER_TOKENS, "stop": ("\n\n",), "repeat_penalty": 1.1}

        def second(text: str) -> Step:
            answer = _tidy(text)
            if not answer or is_copy(answer, earlier_texts):
                return Reply("Sorry, I have no good answer to that. Try /help to see what I can do.")
            return Reply(answer)

        def finish(text: str) -> Step:
            answer = _tidy(text)
            if answer and not is_copy(answer, earlier_texts):
                return Reply(answer)
            # A copy of an earlier message: write again, without the exchange and less greedily.
            return Generate(prompt=alone, finish=second, purpose="retry", temperature=0.7, **words)

        return Generate(prompt=first, finish=finish, purpose="answer", **words)

    def _answer_system(self, turn: Turn) -> str:
        """Who is talking (the persona's first sentence), what the assistant is for, the facts."""
        head = _SENTENCE_END.split(turn.persona.strip(), maxsplit=1)[0] if turn.persona else ""
        parts = [" ".join(part for part in (head, self.about, "Reply in one short, friendly sentence.") if part)]
        if turn.facts:
            parts.append(turn.facts)
        return "\n\n".join(parts)


def _words(text: str) -> list[str]:
    return [word.strip(_TRAILING_PUNCTUATION + _LEADING_PUNCTUATION).casefold() for word in text.split()]


def _trim(value: str, framing: frozenset[str]) -> str:
    """``value`` without framing words, or marks with no letter or digit ("12 May ="), at
    either end (never down to nothing)."""
    words = value.split()

    def loose(word: str) -> bool:
        bare = word.strip(_TRAILING_PUNCTUATION + _LEADING_PUNCTUATION).casefold()
        return bare in framing or not any(char.isalnum() for char in word)

    start, end = 0, len(words)
    while start < end - 1 and loose(words[start]):
        start += 1
    while end - 1 > start and loose(words[end - 1]):
        end -= 1
    return " ".join(words[start:end]).rstrip(_TRAILING_PUNCTUATION) or value


def _tidy_arguments(arguments: dict[str, Any], required: Sequence[str], framing: frozenset[str]) -> dict[str, Any]:
    """Trim framing words off string values; drop an optional value that only repeats a
    required one (a due date of "fix the bike" for the task "fix the bike") or is only framing."""
    tidy: dict[str, Any] = {}
    for key, value in arguments.items():
        if isinstance(value, str):
            trimmed = _trim(value, framing)
            only_framing = all(word in framing for word in _words(value))
            repeats = any(trimmed.casefold() == str(tidy.get(other, "")).casefold() for other in required)
            if key not in required and (only_framing or repeats):
                continue
            value = trimmed
        tidy[key] = value
    return tidy


def _single_numbers(function: Mapping[str, Any], message: str) -> dict[str, Any] | None:
    """The arguments when the tool takes only numbers and the message writes exactly one."""
    properties = _parameters(function).get("properties") or {}
    numbers = _numbers(message)
    if len(numbers) != 1 or not properties:
        return None
    if any(not isinstance(schema, Mapping) or schema.get("type") != "integer" for schema in properties.values()):
        return None
    if set(properties) != set(_required(function)) or len(properties) != 1:
        return None
    return {next(iter(properties)): int(numbers[0])}


def _parse_object(text: str) -> dict[str, Any] | None:
    """The JSON object the model wrote; one cut off by max_tokens keeps its complete members."""
    try:
        value = json.loads(text.strip())
    except ValueError:
        value = close_truncated_json(text.strip())
    return value if isinstance(value, dict) else None


def close_truncated_json(text: str) -> Any:
    """Parse JSON cut off by max_tokens: keep every complete member, close what is open.

    ``{"title": "milk", "due": "2023-01-01T00:00:00:00...`` becomes ``{"title": "milk"}``:
    the runaway value a small model loops on is dropped. ``None`` when nothing parses.
    """
    closers: list[str] = []
    in_string = escaped = False
    cut, cut_closers = 0, ""
    for index, char in enumerate(text):
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
            continue
        if char == '"':
            in_string = True
        elif char in "{[":
            closers.append("}" if char == "{" else "]")
            cut, cut_closers = index + 1, "".join(reversed(closers))
        elif char in "}]" and closers:
            closers.pop()
            cut, cut_closers = index + 1, "".join(reversed(closers))
        elif char == ",":
            cut, cut_closers = index, "".join(reversed(closers))  # what precedes a comma is complete
    if not cut:
        return None
    try:
        return json.loads(text[:cut] + cut_closers)
    except ValueError:
        return None


_ERROR_HEAD = re.compile(r"^error:\s*(?:\w+ failed:\s*)?", re.I)


def _result_reply(name: str, result: str) -> str:
    """The reply for a tool's result: the result itself, errors said plainly."""
    if not result:
        return "Done."
    if result.startswith("error:"):
        return "Sorry, that did not work: " + _ERROR_HEAD.sub("", result)
    if name == "search_memory" and result == "no results":
        return "I found nothing about that in this chat."
    return result


def _tidy(text: str, sentences: int = 2) -> str:
    """The model's words without template debris or a copied agent label, at most
    ``sentences`` sentences, and no half sentence when max_tokens cut it off."""
    answer = text.replace("<|im_end|>", "").strip()
    answer = re.sub(r"^\[[\w-]+ agent\]\s*", "", answer).strip().strip('"').strip()
    parts = _SENTENCE_END.split(answer)
    if len(parts) > 1 and parts[-1] and parts[-1][-1] not in ".!?)":
        parts = parts[:-1]  # cut off mid-sentence
    return " ".join(parts[:sentences]).strip()
