"""References: what a replay counts as recalled or lost.

A *reference* is a pair (user turn, annotated slot value) such that, after normalising
both texts (lower case, words of letters and digits, number words one..twelve as digits):

- the value is not in the turn's own words: not as words, not as the start of a longer
  word ("moderately" says "moderate", "northern" says "north"), and, for values of five
  characters or more, not spelt a little differently (rapidfuzz ratio >= 80 against a
  span of about as many words: "center" says "centre");
- the value is in at least one *source*: one of the previous ``window`` messages of the
  chat whose gold domains (the dataset's labels, so the set is the same for gold and
  predicted routes) do not include the slot's domain; a message with no domain counts as
  ``general``. When the chat chains several dialogues, the source is in the turn's own
  dialogue: they are separate conversations, and a value matching across them ("centre"
  said to the restaurant agent in one, asked of the attraction agent in the next) is a
  coincidence (counted apart, ``other_dialogue``);
- no earlier message of the slot's own domain within the window holds the value: the
  agent's own history then has it, whatever another agent said (counted apart,
  ``own_agent``: "what area is it in?" after the attraction agent named the area);
- the value is informative: not a yes/no/don't-care placeholder and not a bare number
  of one or two digits (counts such as "4" people or "2" nights match unrelated numbers
  in earlier messages too often to name a source).

Each (turn, value) counts once, however many slots carry it. A reference is *recalled*
in a mode when any of its sources is in that mode's history, or, in the awareness modes,
when its value is in the awareness block shown (as normalised words). Sources only older than
the window are reachable through ``search_memory`` in every mode alike; such pairs are
counted apart (``references_beyond_window``) and are not references, so ``full`` recalls
every reference by construction. For ``jsonl`` logs the ``needs`` annotations are the
references: each (turn, needed message id) whose message is within the window, recalled
when that message is in the context.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from rapidfuzz import fuzz, process

from scopehub.hub.routing import DEFAULT_AGENT

from .loaders import Turn

GENERAL = DEFAULT_AGENT

__all__ = ["Reference", "find_references", "normalize_value"]

_WORD_RE = re.compile(r"[a-z0-9]+")
_NUMBER_WORDS = {
    "one": "1", "two": "2", "three": "3", "four": "4", "five": "5", "six": "6",
    "seven": "7", "eight": "8", "nine": "9", "ten": "10", "eleven": "11", "twelve": "12",
}  # fmt: skip
# Values that say nothing a source message could hold ("yes" parking, "dontcare" area).
_UNINFORMATIVE = frozenset(
    {"yes", "no", "none", "true", "false", "dontcare", "dont care", "don t care", "do nt care", "any", "not mentioned", "free", "?"}
)


_SPELLING_CUTOFF = 80  # rapidfuzz ratio: "centre"/"center" 83, "monday"/"sunday" 67


def normalize_value(text: str) -> str:
    """Lower-case words of letters and digits, number words as digits, single-spaced."""
    return " ".join(_NUMBER_WORDS.get(word, word) for word in _WORD_RE.findall(text.lower()))


def _informative(value: str) -> bool:
    if not value or value in _UNINFORMATIVE:
        return False
    return not (value.isdigit() and len(value) <= 2)


def _said(value: str, text: str) -> bool:
    """Whether normalised ``text`` (space-padded) says ``value`` itself: as words, as the
    start of a longer word ("moderately", "northern"), or, for values of five letters or
    more, spelt a little differently ("center", "the slug and lettuce")."""
    if f" {value}" in text:
        return True
    if len(value) < 5:
        return False
    words = text.split()
    size = value.count(" ") + 1
    spans = [" ".join(words[i : i + k]) for k in range(max(1, size - 1), size + 2) for i in range(len(words) - k + 1)]
    return bool(spans) and process.extractOne(value, spans, scorer=fuzz.ratio, score_cutoff=_SPELLING_CUTOFF) is not None


@dataclass(frozen=True, slots=True)
class Reference:
    """A user turn's reference to a value that only an earlier message holds."""

    turn: str  # id of the user turn
    value: str  # normalised value, or the needed message id (jsonl)
    slot: str  # slot name ("needs" for jsonl)
    domain: str  # the slot's domain (agent)
    sources: tuple[str, ...]  # ids of the earlier messages, within the window, that hold it
    raw_value: str = ""  # the value as annotated


def find_references(
    turns: Sequence[Turn],
    *,
    window: int = 40,
    dialogues: Sequence[str] | None = None,
    excluded: Counter[str] | None = None,
) -> tuple[dict[int, list[Reference]], int]:
    """References of one chat (its turns in order), keyed by turn index; and how many
    (turn, value) pairs had their sources only beyond the window (not references).

    ``dialogues`` names the dialogue of each turn when the chat chains several: a source
    must then be in the turn's own dialogue. ``excluded`` counts the pairs that are no
    references for the other two reasons: ``own_agent`` (an earlier message of the
    slot's own domain within the window holds the value: the agent's own history has
    it) and ``other_dialogue`` (only another dialogue of the chain holds it).
    """
    normalized = [f" {normalize_value(turn.text)} " for turn in turns]
    position = {turn.id: index for index, turn in enumerate(turns)}
    found: dict[int, list[Reference]] = {}
    beyond = 0
    for index, turn in enumerate(turns):
        if turn.role != "user":
            continue
        start = max(0, index - window)
        refs: list[Reference] = []
        if turn.needs:
            for needed in dict.fromkeys(turn.needs):
                where = position.get(needed)
                if where is not None and start <= where < index:
                    refs.append(Reference(turn.id, needed, "needs", turn.agents[0] if turn.agents else GENERAL, (needed,), needed))
                else:
                    beyond += 1  # older than the window, later, or unknown: search_memory's job
        seen: set[str] = set()
        for slot in turn.slots:
            value = normalize_value(slot.value)
            if value in seen or not _informative(value):
                continue
            seen.add(value)
            needle = f" {value} "
            if _said(value, normalized[index]):
                continue
            holding = [j for j in range(index) if needle in normalized[j]]
            if any(j >= start and slot.domain in (turns[j].agents or (GENERAL,)) for j in holding):
                if any(slot.domain not in (turns[j].agents or (GENERAL,)) for j in holding) and excluded is not None:
                    excluded["own_agent"] += 1
                continue
            holders = [j for j in holding if slot.domain not in (turns[j].agents or (GENERAL,))]
            if dialogues is not None:
                mine = [j for j in holders if dialogues[j] == dialogues[index]]
                if holders and not mine and excluded is not None:
                    excluded["other_dialogue"] += 1
                holders = mine
            if not holders:
                continue
            sources = tuple(turns[j].id for j in holders if j >= start)
            if sources:
                refs.append(Reference(turn.id, value, slot.name, slot.domain, sources, slot.value))
            else:
                beyond += 1
        if refs:
            found[index] = refs
    return found, beyond
