"""Text for the archive search: tokens, folding, FTS5's Porter stemmer in Python, query terms, snippets, dates in a query.

Tunable constants live in :mod:`._search_base`; ``eval/search_cv.py`` sets them in every search module.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from datetime import UTC, datetime
from functools import lru_cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    pass
from ._search_base import (
    _DATE_SLACK_S,
    _MAX_DATES,
    _MAX_QUERY_CHARS,
    _MAX_TERMS,
    _MAX_TOKEN_CHARS,
    _SNIPPET_CHARS,
    STOPWORDS,
    _Term,
)

# -- text -------------------------------------------------------------------------------------

_TOKEN_RE = re.compile(r"[^\W_]+")


# Emoji and other non-ASCII symbols are separators to FTS5's unicode61 tokenizer, so they
# are never indexed: a query's symbol runs ("🎉", "€") are matched as exact substrings.
_SYMBOL_RUN_RE = re.compile(r"[^\w\s\x00-\x7f]+")
_MAX_SYMBOLS = 4


def _query_symbols(query: str) -> list[str]:
    """The runs of non-ASCII symbols in a query (emoji with their joiners), distinct, in order."""
    found: dict[str, None] = {}
    for run in _SYMBOL_RUN_RE.findall(query[:_MAX_QUERY_CHARS]):
        run = run.strip("".join(ch for ch in run if unicodedata.category(ch).startswith("P")))[:_MAX_TOKEN_CHARS]
        if run and any(unicodedata.category(ch).startswith("S") for ch in run):
            found.setdefault(run)
            if len(found) >= _MAX_SYMBOLS:
                break
    return list(found)


def _fold(text: str) -> str:
    """Lower case without diacritics, like FTS5's ``unicode61 remove_diacritics 2``."""
    text = text.lower()
    if text.isascii():
        return text
    decomposed = unicodedata.normalize("NFKD", text)
    return "".join(ch for ch in decomposed if not unicodedata.combining(ch))


def _cons(word: str, i: int) -> bool:
    ch = word[i]
    if ch in "aeiou":
        return False
    if ch == "y":
        return i == 0 or not _cons(word, i - 1)
    return True


def _measure(stem: str) -> int:
    """Porter's m: the number of vowel-consonant sequences."""
    n, i, size = 0, 0, len(stem)
    while i < size and _cons(stem, i):
        i += 1
    while i < size:
        while i < size and not _cons(stem, i):
            i += 1
        if i >= size:
            break
        while i < size and _cons(stem, i):
            i += 1
        n += 1
    return n


def _has_vowel(stem: str) -> bool:
    return any(not _cons(stem, i) for i in range(len(stem)))


def _double_cons(word: str) -> bool:
    return len(word) >= 2 and word[-1] == word[-2] and _cons(word, len(word) - 1)


def _cvc(word: str) -> bool:
    size = len(word)
    return (
        size >= 3
        and _cons(word, size - 3)
        and not _cons(word, size - 2)
        and _cons(word, size - 1)
        and word[-1] not in "wxy"
    )


_STEP2 = (
    ("ational", "ate"), ("tional", "tion"), ("enci", "ence"), ("anci", "ance"), ("izer", "ize"),
    ("bli", "ble"), ("alli", "al"), ("entli", "ent"), ("eli", "e"), ("ousli", "ous"),
    ("ization", "ize"), ("ation", "ate"), ("ator", "ate"), ("alism", "al"), ("iveness", "ive"),
    ("fulness", "ful"), ("ousness", "ous"), ("aliti", "al"), ("iviti", "ive"), ("biliti", "ble"),
    ("logi", "log"),
)  # fmt: skip
_STEP3 = (
    ("icate", "ic"),
    ("ative", ""),
    ("alize", "al"),
    ("iciti", "ic"),
    ("ical", "ic"),
    ("ful", ""),
    ("ness", ""),
)
_STEP4 = (
    "al", "ance", "ence", "er", "ic", "able", "ible", "ant", "ement", "ment", "ent", "ion", "ou",
    "ism", "ate", "iti", "ous", "ive", "ize",
)  # fmt: skip


@lru_cache(maxsize=262_144)
def porter_stem(word: str) -> str:
    """The Porter (1980) stem of a folded token, identical to FTS5's ``porter`` tokenizer."""
    if len(word) < 3 or len(word) > 64 or not word.isascii():
        return word
    w = word
    if w.endswith("sses") or w.endswith("ies"):
        w = w[:-2]
    elif not w.endswith("ss") and w.endswith("s"):
        w = w[:-1]
    extra = False
    if w.endswith("eed"):
        if _measure(w[:-3]) > 0:
            w = w[:-1]
    elif w.endswith("ed") and _has_vowel(w[:-2]):
        w, extra = w[:-2], True
    elif w.endswith("ing") and _has_vowel(w[:-3]):
        w, extra = w[:-3], True
    if extra:
        if w.endswith(("at", "bl", "iz")):
            w += "e"
        elif _double_cons(w) and w[-1] not in "lsz":
            w = w[:-1]
        elif _measure(w) == 1 and _cvc(w):
            w += "e"
    if w.endswith("y") and _has_vowel(w[:-1]):
        w = w[:-1] + "i"
    for suffix, repl in _STEP2:
        if w.endswith(suffix):
            if _measure(w[: -len(suffix)]) > 0:
                w = w[: -len(suffix)] + repl
            break
    for suffix, repl in _STEP3:
        if w.endswith(suffix):
            if _measure(w[: -len(suffix)]) > 0:
                w = w[: -len(suffix)] + repl
            break
    for suffix in _STEP4:
        if w.endswith(suffix):
            stem = w[: -len(suffix)]
            if _measure(stem) > 1 and (suffix != "ion" or stem[-1:] in ("s", "t")):
                w = stem
            break
    if w.endswith("e"):
        stem = w[:-1]
        m = _measure(stem)
        if m > 1 or (m == 1 and not _cvc(stem)):
            w = stem
    if w.endswith("ll") and _measure(w) > 1:
        w = w[:-1]
    return w


def _text_stems(text: str) -> set[str]:
    return {porter_stem(tok) for tok in set(_TOKEN_RE.findall(_fold(text)))}


def _query_terms(query: str) -> list[_Term]:
    """Distinct content terms of a query, in order; its plain words if it has only stopwords."""
    words = [_fold(tok)[:_MAX_TOKEN_CHARS] for tok in _TOKEN_RE.findall(query[:_MAX_QUERY_CHARS])]
    content = [w for w in words if w not in STOPWORDS] or words
    terms: dict[str, _Term] = {}
    for word in content:
        stem = porter_stem(word)
        if stem and stem not in terms:
            terms[stem] = _Term(word, stem)
            if len(terms) >= _MAX_TERMS:
                break
    return list(terms.values())


def _phrase(word: str) -> str:
    # Tokens hold letters and digits only, so they can never close the quotes.
    return '"' + word.replace('"', "") + '"'


def _match_expr(words: Sequence[str]) -> str:
    return " OR ".join(_phrase(w) for w in dict.fromkeys(words))


def _snippet(text: str, stems: set[str], width: int = _SNIPPET_CHARS) -> str:
    """About ``width`` characters of ``text`` around its first word with one of ``stems``."""
    flat = " ".join(text.split())
    if len(flat) <= width:
        return flat
    start = 0
    for match in _TOKEN_RE.finditer(flat):
        if porter_stem(_fold(match.group())) in stems:
            start = match.start()
            break
    begin = max(0, min(start - width // 4, len(flat) - width))
    if begin > 0:  # do not cut a word in half
        space = flat.find(" ", begin)
        begin = space + 1 if 0 <= space < start else begin
    end = min(len(flat), begin + width - 2)
    if end < len(flat):
        space = flat.rfind(" ", begin, end)
        end = space if space > begin + width // 2 else end
    return ("…" if begin > 0 else "") + flat[begin:end] + ("…" if end < len(flat) else "")


_MONTHS = {
    name: number
    for number, names in enumerate(
        ("jan january", "feb february", "mar march", "apr april", "may", "jun june", "jul july",
         "aug august", "sep sept september", "oct october", "nov november", "dec december"),
        start=1,
    )
    for name in names.split()
}  # fmt: skip
_MONTH_RE = "(" + "|".join(sorted(_MONTHS, key=len, reverse=True)) + r")\b\.?"
_DAY_RE = r"(\d{1,2})(?:st|nd|rd|th)?"
_YEAR_RE = r"((?:19|20)\d\d)\b"
_DATE_PATTERNS = (
    re.compile(rf"\b{_DAY_RE}\s+(?:of\s+)?{_MONTH_RE},?\s*{_YEAR_RE}"),  # 8 May, 2023
    re.compile(rf"\b{_MONTH_RE}\s*{_DAY_RE},?\s*{_YEAR_RE}"),  # May 8, 2023
    re.compile(rf"\b{_MONTH_RE},?\s*{_YEAR_RE}"),  # May 2023
)


def _query_dates(query: str) -> list[tuple[float, float]]:
    """Time windows (UTC seconds, start inclusive, end exclusive) named by dates in a query.

    A full date ("8 May, 2023", "May 8th 2023") is its day with a day's slack each side; a
    month with its year ("July 2023") is that month. A month alone or a weekday is left
    to the words: which year or week is meant is a guess.
    """
    text = _fold(query[:_MAX_QUERY_CHARS])
    windows: list[tuple[float, float]] = []
    taken: list[tuple[int, int]] = []
    for number, pattern in enumerate(_DATE_PATTERNS):
        for match in pattern.finditer(text):
            if any(a < match.end() and match.start() < b for a, b in taken):
                continue
            groups = match.groups()
            try:
                if number == 0:
                    day, month, year = int(groups[0]), _MONTHS[groups[1]], int(groups[2])
                elif number == 1:
                    month, day, year = _MONTHS[groups[0]], int(groups[1]), int(groups[2])
                else:
                    month, day, year = _MONTHS[groups[0]], 0, int(groups[1])
                if day:  # the day, and a day either side (time zones, "yesterday")
                    start = datetime(year, month, day, tzinfo=UTC).timestamp() - _DATE_SLACK_S
                    end = start + 86_400.0 + 2 * _DATE_SLACK_S
                else:
                    start = datetime(year, month, 1, tzinfo=UTC).timestamp()
                    end = datetime(year + month // 12, month % 12 + 1, 1, tzinfo=UTC).timestamp()
            except ValueError:
                continue
            taken.append(match.span())
            windows.append((start, end))
            if len(windows) >= _MAX_DATES:
                return windows
    return windows[:_MAX_DATES]
