"""Small text helpers shared by the router and the context builder (pure)."""

from __future__ import annotations

import re
from functools import lru_cache

__all__ = ["STOPWORDS", "content_terms", "stem", "terms"]

_WORD_RE = re.compile(r"[^\W_]+(?:['’][^\W_]+)?", re.UNICODE)

STOPWORDS = frozenset(
    ["a", "about", "above", "after", "again", "against", "all", "also", "am", "an", "and", "any", "are", "aren't", "as", "at", "be", "because", "been", "before", "being", "below", "between", "both", "but", "by", "can", "can't", "cannot", "could", "couldn't", "did", "didn't", "do", "does", "doesn't", "doing", "don't", "down", "during", "each", "few", "for", "from", "further", "get", "got", "had", "hadn't", "has", "hasn't", "have", "haven't", "having", "he", "he'd", "he'll", "he's", "her", "here", "here's", "hers", "herself", "him", "himself", "his", "how", "how's", "i", "i'd", "i'll", "i'm", "i've", "if", "in", "into", "is", "isn't", "it", "it's", "its", "itself", "just", "let's", "me", "more", "most", "much", "must", "mustn't", "my", "myself", "need", "no", "nor", "not", "now", "of", "off", "on", "once", "only", "or", "other", "ought", "our", "ours", "ourselves", "out", "over", "own", "please", "same", "shall", "shan't", "she", "she'd", "she'll", "she's", "should", "shouldn't", "so", "some", "such", "than", "that", "that's", "the", "their", "theirs", "them", "themselves", "then", "there", "there's", "these", "they", "they'd", "they'll", "they're", "they've", "this", "those", "through", "to", "too", "under", "until", "up", "upon", "us", "very", "want", "was", "wasn't", "we", "we'd", "we'll", "we're", "we've", "were", "weren't", "what", "what's", "when", "when's", "where", "where's", "which", "while", "who", "who's", "whom", "why", "why's", "will", "with", "won't", "would", "wouldn't", "you", "you'd", "you'll", "you're", "you've", "your", "yours", "yourself", "yourselves", "yes", "yeah", "yep", "ok", "okay", "sure", "thanks", "thank", "thx", "great", "good", "fine", "perfect", "cool", "alright", "right", "also", "anything", "something", "everything", "nothing", "one", "like", "know", "think", "well", "hi", "hello", "hey", "bye", "goodbye", "would", "sounds", "sound", "that'll", "lot", "really", "just"]
)


@lru_cache(maxsize=65536)
def stem(word: str) -> str:
    """A light English suffix stripper: enough to match 'restaurants' with 'restaurant'."""
    if len(word) <= 3 or not word.isascii():
        return word
    for suffix, keep in (("ies", "y"), ("sses", "ss"), ("ing", ""), ("ed", ""), ("es", ""), ("s", "")):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            if suffix == "s" and word.endswith(("ss", "us", "is")):
                return word
            return word[: len(word) - len(suffix)] + keep
    return word


def terms(text: str) -> list[str]:
    """Lower-cased word tokens of ``text`` (any script)."""
    return [match.group(0).replace("’", "'") for match in _WORD_RE.finditer(text.lower())]


def content_terms(text: str) -> list[str]:
    """Stemmed tokens of ``text`` without stopwords and one-letter words."""
    return [stem(word) for word in terms(text) if word not in STOPWORDS and (len(word) > 1 or not word.isascii())]


# -- English back-references and switch cues (routing); add a language by adding its patterns.
# "that email", "the restaurant", "this hotel": a noun phrase pointing back at earlier content.
DEICTIC_RE = re.compile(r"\b(?:that|this|those|these|the|same)\s+(\w+)")
# Back-references that name no domain: "the same day", "a cab there", "between the two"
# (not the "there" of "is there", "there will be").
ANAPHORA_RE = re.compile(
    r"\b(?:same|both|between|the two"
    r"|(?<!is )(?<!are )there(?!['’]s| (?:is|are|was|were|will|would|should|might|be|any)\b)"
    r"|that (?:area|day|date|time|place|location|price|night|trip|commute))\b",
    re.I,
)
# These may point past the thread just before: look at the two before.
PAIR_WORDS = frozenset({"both", "between", "the two", "same"})
# Words people use to start a new errand in the same chat ("I also need a taxi").
SWITCH_CUE_RE = re.compile(r"\b(?:also|too|as well|additionally)\b", re.I)

