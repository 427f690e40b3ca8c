"""Facts come from the person's own words: what a message says itself, and whether a
candidate fact's values are really in it.

A model that extracts facts may invent them (a 135M model turned a pasted email into
"Ram's email is Ram@example.com, please update your address to the new one.", and "I'm
allergic to peanuts" into "The user's name is Sam."). So every candidate that would
store something is checked against the message, with no model: its email addresses,
numbers, names and other content words must all be found in the person's words. Only
the framing of a third-person sentence ("User's ... is ...", "lives in") may be new.
"""

from __future__ import annotations

import re

from scopehub.hub.facts.text import APOSTROPHES

__all__ = ["grounded", "own_words"]

_HEADER_LINE = re.compile(r"^[>\s*]*(?:from|to|cc|bcc|subject|date|sent|reply-to)\s*:", re.I)
_FORWARD_LINE = re.compile(r"^[-\s>]*(?:forwarded message|original message|begin forwarded message)\b", re.I)
_EMAIL = re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+")
_URL = re.compile(r"\bhttps?://\S+|\bwww\.\S+", re.I)
_NUMBER = re.compile(r"\+?\d[\d\s().-]*\d|\d")
_WORD = re.compile(r"[^\W\d_][\w'-]*")
# How a fact is said in the third person: words that may appear in a candidate without
# being in the message ("User's email is ...", "Priya lives in Pune", "User is allergic to ...").
_FRAMING = frozenset(
    """
    a an the and or but of in on at to for from with as by about is are was were be been being has have had
    does do not no never longer anymore any more now currently still also only their theirs his her hers its they
    them he she it this that these those who which whose user user's users person person's people customer
    speaker someone their's s named called name names lives live living lived resides works work working worked
    employed job role title email e-mail mail address phone number mobile telephone contact birthday born age
    years old home city town country based located location prefers prefer preferred preference likes like loves
    love enjoys hates dislikes favourite favorite wants allergic allergy allergies intolerant diet dietary eats
    eat avoids avoid follows keeps speaks speak language office employer team department company manager boss
    relationship married partner wife husband spouse child children son daughter sibling sister brother mother
    father mom mum dad parent parents friend friends colleague has is
    """.split()  # noqa: SIM905 - a word list reads better as text
)
_DANGLING = re.compile(r"\b(?:is|are|was|were|be|to|at|in|of|for|with|from|by)\s*[.!:,]?\s*$", re.I)
_SUBJECTS = frozenset({"user", "we", "us", "i", "me", "my", "person", "speaker"})


def own_words(text: str) -> str:
    """What the person wrote themselves: a pasted or forwarded email and quoted lines left out.

    "here is Ram's mail:" followed by ``From:``/``Subject:`` headers keeps the first line
    only; lines starting with ``>`` are quotes. A message with no header block is kept whole.
    """
    lines = text.splitlines()
    kept: list[str] = []
    for index, line in enumerate(lines):
        if _FORWARD_LINE.match(line):
            break
        if _HEADER_LINE.match(line) and any(_HEADER_LINE.match(later) for later in lines[index + 1 : index + 4]):
            break  # two header lines close together: an email starts here
        if line.lstrip().startswith(">"):
            continue
        kept.append(line)
    return "\n".join(kept).strip()


def _digits(text: str) -> str:
    return re.sub(r"\D", "", text)


def _word_forms(text: str) -> set[str]:
    words = {word.casefold().removesuffix("'s") for word in _WORD.findall(text.translate(APOSTROPHES))}
    return words | {_root(word) for word in words}


def _root(word: str) -> str:
    """A crude shared root: "peanuts"/"peanut", "designer"/"designers", "lives"/"live"."""
    for suffix in ("ies", "es", "s", "ed", "ing", "ly"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            return word[: -len(suffix)]
    return word


def grounded(fact_text: str, key: str | None, source: str) -> bool:
    """Whether every value of a candidate fact is in ``source`` (the person's own words).

    Checked: email addresses and links (exactly, ignoring case), numbers (digit by digit,
    so "555-0100" matches "555 0100"), the key's subject ("ram" of ``ram.email``), and
    every other word outside the third-person framing.
    """
    text = fact_text.translate(APOSTROPHES)
    if _DANGLING.search(text):
        return False  # "The user's email is": a statement that stops at its verb states nothing
    plain = source.translate(APOSTROPHES)
    lowered = plain.casefold()
    for pattern in (_EMAIL, _URL):
        for value in pattern.findall(text):
            if value.casefold().rstrip(".,;") not in lowered:
                return False
        text = pattern.sub(" ", text)
    source_digits = _digits(_URL.sub(" ", _EMAIL.sub(" ", plain)))
    for value in _NUMBER.findall(text):
        if _digits(value) not in source_digits:
            return False
    text = _NUMBER.sub(" ", text)
    available = _word_forms(plain)
    if key:
        subject = key.split(".", 1)[0].replace("_", " ")
        if subject not in _SUBJECTS and not all(part in available for part in subject.split()):
            return False
    for word in _WORD.findall(text):
        form = word.casefold().removesuffix("'s")
        if form in _FRAMING or form in available or _root(form) in available:
            continue
        return False
    return True
