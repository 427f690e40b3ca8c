"""A tiny GBNF matcher for tests: does a grammar admit a string?

Covers what the planner writes: rules, alternatives, sequences, string literals, rule
references, groups and the ``?`` suffix (character classes are not needed). llama.cpp
itself is only there with the ``local`` extra; this lets the suite check grammars without it.
"""

from __future__ import annotations

import re
from functools import cache

_TOKEN = re.compile(r'\s*(?:(?P<lit>"(?:[^"\\]|\\.)*")|(?P<name>[a-zA-Z][a-zA-Z0-9-]*)|(?P<op>[()|?]))')


def _unescape(literal: str) -> str:
    return re.sub(r"\\(.)", lambda m: {"n": "\n", "r": "\r", "t": "\t"}.get(m[1], m[1]), literal[1:-1])


def parse(grammar: str) -> dict[str, list]:
    """Rules as nested lists: an alternative is a list of items; an item is ("lit", s),
    ("ref", name), ("group", alternatives) or ("opt", item)."""
    rules: dict[str, list] = {}
    for line in grammar.splitlines():
        if not line.strip():
            continue
        name, _, body = line.partition("::=")
        tokens = [(m.lastgroup, m.group(m.lastgroup)) for m in _TOKEN.finditer(body) if m.lastgroup]
        alternatives, rest = _alternatives(tokens)
        assert not rest, f"unparsed: {rest}"
        rules[name.strip()] = alternatives
    return rules


def _alternatives(tokens):
    alternatives = [[]]
    while tokens:
        kind, value = tokens[0]
        if kind == "op" and value == ")":
            break
        tokens = tokens[1:]
        if kind == "op" and value == "|":
            alternatives.append([])
            continue
        if kind == "lit":
            item = ("lit", _unescape(value))
        elif kind == "name":
            item = ("ref", value)
        elif value == "(":
            inner, tokens = _alternatives(tokens)
            tokens = tokens[1:]  # the closing bracket
            item = ("group", inner)
        else:  # "?" applies to the item before it
            alternatives[-1][-1] = ("opt", alternatives[-1][-1])
            continue
        alternatives[-1].append(item)
    return alternatives, tokens


def admits(grammar: str, text: str) -> bool:
    """Whether ``grammar`` (root rule ``root``) matches all of ``text``."""
    rules = parse(grammar)

    @cache
    def ends(kind_value, start: int) -> frozenset[int]:
        kind, value = kind_value
        if kind == "lit":
            return frozenset({start + len(value)}) if text.startswith(value, start) else frozenset()
        if kind == "ref":
            return alts(("rule", value), start)
        if kind == "opt":
            return frozenset({start}) | ends(value, start)
        return alts(value, start)

    @cache
    def alts(key, start: int) -> frozenset[int]:
        alternatives = rules[key[1]] if key[0] == "rule" else key
        found: set[int] = set()
        for sequence in alternatives:
            positions = {start}
            for item in sequence:
                positions = {end for position in positions for end in ends(_freeze(item), position)}
            found |= positions
        return frozenset(found)

    return len(text) in alts(("rule", "root"), 0)


def _freeze(item):
    kind, value = item
    if kind == "group":
        return (kind, tuple(tuple(_freeze(i) for i in seq) for seq in value))
    if kind == "opt":
        return (kind, _freeze(value))
    return item
