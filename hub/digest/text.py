"""Text pieces shared by the digest and reflection. Pure: no I/O.

- :func:`sentences` splits a message into sentences (long ones into clauses);
- :class:`Salience` scores a sentence by what it says that the rest of the chat does not
  (rare content words), and by names, numbers and dates, with no model call;
- :func:`untraceable` lists the names, numbers and dates of a line that its source
  messages do not contain: the check every model-written line must pass.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from zoneinfo import ZoneInfo

__all__ = [
    "STOPWORDS",
    "Salience",
    "SourceText",
    "content_words",
    "date_label",
    "date_words",
    "sentences",
    "untraceable",
    "words",
]

_WORD_RE = re.compile(r"[^\W\d_]+(?:['’][^\W\d_]+)*|\d+(?:[.,:/]\d+)*", re.UNICODE)
_NUMBER_RE = re.compile(r"\d+(?:[.,:/]\d+)*")
# After . ! ? or … (and a closing quote or bracket, which stays with its sentence).
_SENTENCE_RE = re.compile(r"(?<=[.!?…])\s+|(?<=[.!?…][\"'”’)\]])\s+|\n+")
_CLAUSE_RE = re.compile(r"(?<=[,;:])\s+|\s+[-–—]\s+")

MAX_LINE_WORDS = 20  # a longer sentence is cut into clauses: the digest has little room

# Function words and chat filler: never a reason to keep a sentence.
_STOP_TEXT = """a about above after again against ago all also am an and any are as at be because been before
    being below between both but by can could did do does doing done down during each else ever few for
    from further get gets got had has have having he her here hers herself him himself his how i if in into is
    it its itself just let me more most my myself no nor not now of off on once only or other our ours
    ourselves out over own please same she should so some such than that the their theirs them
    themselves then there these they this those through to too under until up us very was we were what
    when where which while who whom whose why will with would you your yours yourself yourselves
    s t d ll m re ve don didn doesn isn wasn weren won wouldn aren hasn haven couldn shouldn hadn
    yes yeah yep no nope ok okay oh ah hey hi hello thanks thank lol haha wow cool nice great awesome
    really so much very totally definitely sure glad happy love like know think feel good sounds amazing
    things thing stuff lot lots way always never something anything everything one ones i'm it's that's
    you're i've i'd i'll can't don't didn't it'd we're they're let's what's there's"""
STOPWORDS = frozenset(_STOP_TEXT.split())

MONTHS = ("january", "february", "march", "april", "may", "june", "july", "august", "september", "october", "november", "december")
WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_MONTH_ABBR = {m[:3]: m for m in MONTHS} | {"sept": "september"}
_NUMBER_WORDS = {
    "zero": 0, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8,
    "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "thirteen": 13, "fourteen": 14, "fifteen": 15,
    "sixteen": 16, "seventeen": 17, "eighteen": 18, "nineteen": 19, "twenty": 20, "thirty": 30,
    "forty": 40, "fifty": 50, "sixty": 60, "seventy": 70, "eighty": 80, "ninety": 90, "hundred": 100,
    "thousand": 1000, "million": 1_000_000, "first": 1, "second": 2, "third": 3, "dozen": 12,
}  # fmt: skip
# Words that begin a sentence with a capital without being a name.
_COMMON_OPENERS = STOPWORDS | {"today", "yesterday", "tomorrow", "last", "next", "recently", "later", "earlier", "both"}


def words(text: str) -> list[str]:
    """Word and number tokens of ``text``, as written."""
    return _WORD_RE.findall(text)


def _key(word: str) -> str:
    """A word's comparison form: lower case, possessive and plural ``s`` dropped."""
    word = word.lower().replace("’", "'")
    if word.endswith("'s"):
        word = word[:-2]
    return word


def sentences(text: str, *, max_words: int = MAX_LINE_WORDS) -> list[str]:
    """The sentences of ``text``; a sentence longer than ``max_words`` becomes its clauses."""
    out: list[str] = []
    for raw in _SENTENCE_RE.split(text):
        sentence = " ".join(raw.split())
        if not sentence:
            continue
        if len(sentence.split()) <= max_words:
            out.append(sentence)
            continue
        clause = ""
        for part in _CLAUSE_RE.split(sentence):
            candidate = f"{clause} {part}".strip()
            if clause and len(candidate.split()) > max_words:
                out.append(clause)
                candidate = part
            clause = candidate
        if clause:
            # A single clause longer than max_words is cut: the line stays a verbatim prefix.
            out.append(" ".join(clause.split()[:max_words]))
    return out


def date_label(ts: float, zone: ZoneInfo) -> str:
    """``8 May 2023``: the day a line's sources were written."""
    moment = datetime.fromtimestamp(ts, tz=zone)
    return f"{moment.day} {moment.strftime('%B')} {moment.year}"


def date_words(ts: float, zone: ZoneInfo) -> set[str]:
    """Every date or time word of a message's timestamp: a line may state its own sources' dates."""
    moment = datetime.fromtimestamp(ts, tz=zone)
    hour12 = moment.hour % 12 or 12
    return {
        str(moment.day),
        f"{moment.day:02d}",
        str(moment.month),
        f"{moment.month:02d}",
        str(moment.year),
        moment.strftime("%B").lower(),
        moment.strftime("%b").lower(),
        moment.strftime("%A").lower(),
        f"{moment.hour}:{moment.minute:02d}",
        f"{moment.hour:02d}:{moment.minute:02d}",
        f"{hour12}:{moment.minute:02d}",
        str(hour12),
        str(moment.hour),
    }


@dataclass(frozen=True, slots=True)
class SourceText:
    """What a line may draw on: a source message's text, speaker and time."""

    text: str
    who: str | None = None
    ts: float | None = None


def _number_forms(token: str) -> set[str]:
    plain = token.replace(",", "")
    forms = {token, plain}
    if plain.isdigit():
        forms.add(str(int(plain)))
    return forms


def untraceable(line: str, sources: Sequence[SourceText], *, zone: ZoneInfo, names: Iterable[str] = ()) -> list[str]:
    """The names, numbers and dates in ``line`` that its ``sources`` do not contain.

    Names are capitalised words (a sentence's first word only when it is not a common
    word the sources use); numbers are digits or number words; month and weekday names
    count as names. A source contributes its text, its speaker and the date and time it
    was written. ``names`` are always allowed (the agents' own names). Empty = traceable.
    """
    allowed: set[str] = {_key(n) for n in names}
    numbers: set[str] = set()
    for source in sources:
        for token in words(source.text):
            if _NUMBER_RE.fullmatch(token):
                numbers |= _number_forms(token)
            else:
                allowed.add(_key(token))
                if token.lower() in _NUMBER_WORDS:
                    numbers.add(str(_NUMBER_WORDS[token.lower()]))
        if source.who:
            allowed |= {_key(part) for part in words(source.who)}
        if source.ts is not None:
            for word in date_words(source.ts, zone):
                (numbers if word[0].isdigit() else allowed).add(word)
    # Month abbreviations in the sources allow the full name and back.
    allowed |= {_MONTH_ABBR[w] for w in list(allowed) if w in _MONTH_ABBR}
    allowed |= {m[:3] for m in MONTHS if m in allowed}
    bad: list[str] = []
    for sentence in re.split(r"(?<=[.!?:;])\s+|^\s*[-*•]\s*", line):
        tokens = words(sentence)
        for index, token in enumerate(tokens):
            lower = token.lower()
            if _NUMBER_RE.fullmatch(token):
                if not (_number_forms(token) & numbers):
                    bad.append(token)
                continue
            if lower in _NUMBER_WORDS and lower not in ("one", "first", "second"):
                # "one"/"first"/"second" are too often not numbers at all ("one of", "a second").
                if lower not in allowed and str(_NUMBER_WORDS[lower]) not in numbers:
                    bad.append(token)
                continue
            if not token[0].isupper():
                continue
            key = _key(token)
            if key in allowed or (key.endswith("s") and key[:-1] in allowed):
                continue
            if index == 0 and (lower in _COMMON_OPENERS or lower.endswith(("ed", "ing", "ly"))):
                continue  # a sentence's first word, not a name ("Planned ...", "Recently ...")
            if lower in ("i", "i'm", "i've", "i'd", "i'll"):
                continue
            bad.append(token)
    return bad


# -- salience ------------------------------------------------------------------------------------


def content_words(text: str) -> set[str]:
    """The content words of ``text``: lower case, no function words, no numbers, three letters or more."""
    return {
        key
        for token in words(text)
        if not token[0].isdigit() and len(key := _key(token)) >= 3 and key not in STOPWORDS
    }


class Salience:
    """Scores sentences by what they tell, with no model: rare words, names, numbers, dates.

    Document frequencies come from the scope's own messages (``add``), so "dog" is
    common in a chat about dogs and rare elsewhere. Questions and filler score low.
    """

    NAME = 1.5  # per distinct name (a capitalised word past a sentence's start)
    NUMBER = 1.5  # per distinct number
    DATE = 2.0  # per month, weekday or time-of-day word
    QUESTION = 0.4  # a question asks; it seldom tells
    MIN_CONTENT = 3  # content words: "Love that purple color!" is a reaction, not news

    def __init__(self) -> None:
        self.df: Counter[str] = Counter()
        self.docs = 0

    def add(self, texts: Iterable[str]) -> Salience:
        for text in texts:
            self.df.update(content_words(text))
            self.docs += 1
        return self

    def idf(self, word: str) -> float:
        return math.log((self.docs + 1) / (self.df.get(word, 0) + 0.5))

    def score(self, sentence: str) -> float:
        """How much ``sentence`` tells; 0 for filler."""
        tokens = words(sentence)
        content = content_words(sentence)
        if len(content) < self.MIN_CONTENT:
            return 0.0
        value = sum(max(0.0, self.idf(word)) for word in content)
        names = {t for i, t in enumerate(tokens) if i > 0 and t[0].isupper() and _key(t) not in STOPWORDS and t.lower() != "i"}
        value += self.NAME * len(names)
        value += self.NUMBER * len({t for t in tokens if t[0].isdigit()})
        value += self.DATE * len({t.lower() for t in tokens if t.lower() in MONTHS or t.lower() in WEEKDAYS})
        if sentence.rstrip().endswith("?"):
            value *= self.QUESTION
        # Information per word, with diminishing returns on length: a long sentence must
        # say more to be worth its tokens.
        return value / math.sqrt(max(len(tokens), 4))
