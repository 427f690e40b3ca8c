"""GBNF grammars for a tool's JSON arguments written from the person's words, and
reading back what the model wrote (a JSON object, possibly cut off by max_tokens)."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = [
    "arguments_grammar",
    "close_truncated_json",
    "numbers_in",
    "parameters_of",
    "parse_object",
    "prefill",
    "required_of",
    "single_number_arguments",
    "source_words",
    "tidy_arguments",
    "words_of",
]

MAX_SOURCE_WORDS = 400  # words of message + last reply a string argument may be built from
_NUMBER = re.compile(r"(?<![\w.])#?(\d{1,9})(?![\w.]*\d)")
TRAILING_PUNCTUATION = ".,;:!?)]}\"'"
LEADING_PUNCTUATION = "([{\"'"


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
        word = raw.lstrip(LEADING_PUNCTUATION) or raw
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
        ends.setdefault(node, {word, word.rstrip(TRAILING_PUNCTUATION) or word})
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


def numbers_in(source: str) -> list[str]:
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
        numbers = numbers_in(source)
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
        if prop not in required and schema.get("type") in ("integer", "number") and not numbers_in(source):
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


def parse_object(text: str) -> dict[str, Any] | None:
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


def parameters_of(function: Mapping[str, Any]) -> Mapping[str, Any]:
    """A function schema's ``parameters`` object ({} when missing)."""
    params = function.get("parameters")
    return params if isinstance(params, Mapping) else {}


def required_of(function: Mapping[str, Any]) -> list[str]:
    """The required parameters that the schema also describes."""
    params = parameters_of(function)
    properties = params.get("properties") or {}
    return [name for name in params.get("required") or () if name in properties]


def words_of(text: str) -> list[str]:
    return [word.strip(TRAILING_PUNCTUATION + LEADING_PUNCTUATION).casefold() for word in text.split()]


def _trim(value: str, framing: frozenset[str]) -> str:
    """``value`` without framing words, or marks with no letter or digit ("12 May ="), at
    either end (never down to nothing)."""
    words = value.split()

    def loose(word: str) -> bool:
        bare = word.strip(TRAILING_PUNCTUATION + LEADING_PUNCTUATION).casefold()
        return bare in framing or not any(char.isalnum() for char in word)

    start, end = 0, len(words)
    while start < end - 1 and loose(words[start]):
        start += 1
    while end - 1 > start and loose(words[end - 1]):
        end -= 1
    return " ".join(words[start:end]).rstrip(TRAILING_PUNCTUATION) or value


def tidy_arguments(arguments: dict[str, Any], required: Sequence[str], framing: frozenset[str]) -> dict[str, Any]:
    """Trim framing words off string values; drop an optional value that only repeats a
    required one (a due date of "fix the bike" for the task "fix the bike") or is only framing."""
    tidy: dict[str, Any] = {}
    for key, value in arguments.items():
        if isinstance(value, str):
            trimmed = _trim(value, framing)
            only_framing = all(word in framing for word in words_of(value))
            repeats = any(trimmed.casefold() == str(tidy.get(other, "")).casefold() for other in required)
            if key not in required and (only_framing or repeats):
                continue
            value = trimmed
        tidy[key] = value
    return tidy


def single_number_arguments(function: Mapping[str, Any], message: str) -> dict[str, Any] | None:
    """The arguments when the tool takes only numbers and the message writes exactly one."""
    properties = parameters_of(function).get("properties") or {}
    numbers = numbers_in(message)
    if len(numbers) != 1 or not properties:
        return None
    if any(not isinstance(schema, Mapping) or schema.get("type") != "integer" for schema in properties.values()):
        return None
    if set(properties) != set(required_of(function)) or len(properties) != 1:
        return None
    return {next(iter(properties)): int(numbers[0])}
