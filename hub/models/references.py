"""Finding the item a message means when it names no number: "I finished the report",
"cancel the pizza reminder", "write Lena a short reply".

A tool that takes an item's number (``complete_task(id)``, ``draft_reply(email_id)``) has
a listing tool beside it (``list_tasks``, ``list_emails``): the planner calls that first
and picks the listed line whose words the message shares (:func:`pick_line`). Which
listing belongs to which parameter follows the tools' names: ``id`` of ``verb_noun``
is listed by ``list_nouns``, ``noun_id`` of any tool by ``list_nouns``.

Everything here is pure text work over the listing the tool returned.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

__all__ = ["content_words", "email_reply_about", "is_kept_email", "kept_reply_asked_about", "kept_reply_of_read", "listing_for", "number_parameter", "pick_line", "read_email_number", "stem"]

_LINE_NUMBER = re.compile(r"^#(\d+)\b")
_POSSESSIVE = re.compile(r"['’]s$")
# French and Italian elision: "l'école" names the school ("École Jules Ferry"), "d'Anna" Anna.
_ELIDED = re.compile(r"^(?:l|d|j|m|n|s|t|c|qu|all|dell|nell|sull)['’](?=[^\W\d_]{2})")
_WORD = re.compile(r"[^\W_]+(?:['’][^\W_]+)?", re.UNICODE)
# Words that say what to do with an item, not which item it is (several languages: the
# router's). They never pick a line.
_NOT_CONTENT = frozenset(
    ["a", "an", "the", "this", "that", "these", "those", "it", "its", "my", "me", "mine", "your", "our", "to", "of", "for", "on", "in", "at", "by", "with", "and", "or", "but", "is", "are", "was", "be", "been", "am", "i", "you", "we", "he", "she", "they", "them", "him", "her", "his", "their", "there", "here", "what", "which", "who", "whom", "whose", "when", "where", "how", "please", "can", "could", "would", "will", "shall", "should", "do", "does", "did", "done", "have", "has", "had", "just", "also", "still", "already", "now", "then", "task", "tasks", "todo", "to-do", "list", "note", "notes", "email", "emails", "mail", "mails", "reminder", "reminders", "item", "items", "one", "ones", "thing", "mark", "marked", "tick", "ticked", "check", "checked", "off", "complete", "completed", "finish", "finished", "finishing", "close", "closed", "delete", "deleted", "remove", "removed", "drop", "cancel", "cancelled", "canceled", "scrap", "stop", "forget", "get", "rid", "read", "open", "show", "see", "tell", "say", "saying", "reply", "answer", "write", "draft", "short", "quick", "polite", "back", "about", "again", "number", "entry", "move", "change", "rename", "edit", "postpone", "push", "set", "put", "add", "new", "der", "die", "das", "den", "dem", "des", "ein", "eine", "einen", "einem", "einer", "und", "oder", "ist", "sind", "ich", "du", "mein", "meine", "meinen", "mir", "mich", "le", "la", "les", "un", "une", "des", "et", "ou", "est", "je", "tu", "mon", "ma", "mes", "moi", "el", "los", "las", "uno", "una", "y", "o", "es", "yo", "mi", "mis",
     # Question words of German, French and Spanish ask, as "what" and "where" do; they name nothing.
     "wie", "wo", "wann", "wer", "welche", "welcher", "welches", "comment", "quel", "quelle", "quels", "quelles", "où",
     "quand", "qui", "cómo", "cuál", "cuáles", "dónde", "cuándo", "quién", "qué",
     # Their articles fused with a preposition, and their commonest prepositions: "lo del taller"
     # and "lo del dentista" share no item word.
     "lo", "del", "al", "de", "en", "con", "por", "para", "que", "du", "au", "aux", "pour", "avec", "sur", "zum", "zur", "vom", "beim",
     "im", "mit", "für", "von", "auf", "zu", "bei"]
)
# "the thing Lena asked for", "the deadline from that email": words that point at an email's request.
_REFERS_TO_EMAIL = re.compile(
    r"\b(?:asked|asks|wants?|wanted|needs?|request(?:ed|s)?|deadline|action items?|the thing|"
    r"(?:from|in|of) (?:the|that|this|her|his|their|last) (?:e-?mail|mail|message))\b",
    re.I,
)
_KEPT_EMAIL = re.compile(r"^(?:\[inbox agent\]\s*)?Kept email #\d+", re.I)


def stem(word: str) -> str:
    """A crude stem that makes "buying" meet "buy", "reminders" meet "reminder"."""
    word = word.casefold()
    for suffix in ("ing", "ed", "es", "s"):
        if len(word) > len(suffix) + 2 and word.endswith(suffix):
            return word[: -len(suffix)]
    return word


# Irregular past forms meet their verb, and ringing meets calling: "rang the vets" names the
# task "call the vets to book ...", "bought the stamps" names "buy stamps". Keyed by stem.
_SAME_VERB = {
    "rang": "call", "rung": "call", "ring": "call", "phon": "call",
    "bought": "buy", "paid": "pay", "sent": "send", "wrote": "write", "written": "write", "took": "take", "taken": "take",
    "brought": "bring", "gave": "give", "given": "give", "sold": "sell", "found": "find", "told": "tell", "spoke": "speak",
    "spoken": "speak", "drove": "drive", "driven": "drive", "ate": "eat", "eaten": "eat",
}


def content_words(text: str) -> set[str]:
    """The stems of the words that can name an item (not "delete", "the", "task")."""
    found = set()
    for word in _WORD.findall(text):
        word = _ELIDED.sub("", _POSSESSIVE.sub("", word.casefold()))
        if word not in _NOT_CONTENT and not word.isdigit():
            root = stem(word)
            found.add(_SAME_VERB.get(root, root))
    return found


def _shares(line_words: set[str], wanted: set[str]) -> int:
    """How many wanted stems the line has; a stem of four letters or more also meets a
    longer or shorter form of itself ("buy" / "buying" already stem alike)."""
    score = 0
    for word in wanted:
        if word in line_words or (len(word) >= 4 and any(other.startswith(word) or word.startswith(other) for other in line_words if len(other) >= 4)):
            score += 1
    return score


def pick_line(listing: str, *texts: str) -> int | None:
    """The number of the listed item (``#N ...`` lines) that shares the most content words
    with ``texts``; None when no line shares any, or two lines tie at the top."""
    wanted: set[str] = set()
    for text in texts:
        wanted |= content_words(text)
    if not wanted:
        return None
    scored: list[tuple[int, int]] = []
    for line in listing.splitlines():
        match = _LINE_NUMBER.match(line.strip())
        if match:
            scored.append((_shares(content_words(line[match.end() :]), wanted), int(match[1])))
    scored.sort(reverse=True)
    if not scored or scored[0][0] == 0 or (len(scored) > 1 and scored[1][0] == scored[0][0]):
        return None
    return scored[0][1]


def newest_line(listing: str) -> int | None:
    """The first listed number (listings of emails and notes put the newest first)."""
    for line in listing.splitlines():
        match = _LINE_NUMBER.match(line.strip())
        if match:
            return int(match[1])
    return None


def _name_tail(name: str) -> str:
    return name.rsplit("_", 1)[-1] if "_" in name else name


def number_parameter(function: Mapping[str, Any]) -> str | None:
    """The integer parameter that names an item (``id``, ``email_id``), if the tool has one."""
    parameters = function.get("parameters")
    properties = parameters.get("properties") if isinstance(parameters, Mapping) else None
    for name, schema in (properties or {}).items():
        if (name == "id" or name.endswith("_id")) and isinstance(schema, Mapping) and schema.get("type") == "integer":
            return str(name)
    return None


def listing_for(tool: str, parameter: str, offered: Iterable[str]) -> str | None:
    """The offered tool that lists what ``parameter`` of ``tool`` numbers (see the module docstring)."""
    noun = parameter[: -len("_id")] if parameter.endswith("_id") else _name_tail(tool)
    names = set(offered)
    for candidate in (f"list_{noun}s", f"list_{noun}es", f"list_{noun}"):
        if candidate in names and candidate != tool:
            return candidate
    return None


def is_kept_email(text: str) -> bool:
    """Whether ``text`` is the inbox's "Kept email #N" reply."""
    return bool(_KEPT_EMAIL.match(text))


_READ_EMAIL = re.compile(r"^(?:\[inbox agent\]\s*)?Email #(\d+):")


def read_email_number(text: str) -> str | None:
    """The number of the email a read_email result or reply ("Email #3: subject ...") shows; None for other text."""
    match = _READ_EMAIL.match(text)
    return None if match is None else match[1]


def kept_reply_of_read(history: Sequence[Mapping[str, str]], reply: str) -> str:
    """The "Kept email #N" reply of the email a read_email reply ("Email #N: ...") shows;
    '' when ``reply`` reads no email or the history does not hold its keeping."""
    number = read_email_number(reply)
    if number is None:
        return ""
    kept = re.compile(rf"^(?:\[inbox agent\]\s*)?Kept email #{number}\b", re.I)
    for item in reversed(history):
        if item.get("role") == "assistant" and kept.match(item.get("content", "")):
            return item["content"]
    return ""


def kept_reply_asked_about(history: Sequence[Mapping[str, str]], is_question: Callable[[str], bool]) -> str:
    """The "Kept email #N" reply just before the question the last reply answered ("how much
    is the trip?" right after the school's email was kept); '' when the exchange before the
    last reply is no question about a kept email."""
    items = [item for item in history if item.get("role") in ("user", "assistant")]
    if len(items) < 3 or items[-1].get("role") != "assistant" or items[-2].get("role") != "user":
        return ""
    if not is_question(items[-2].get("content", "")):
        return ""
    before = items[-3]
    return before["content"] if before.get("role") == "assistant" and _KEPT_EMAIL.match(before.get("content", "")) else ""


def email_reply_about(history: Sequence[Mapping[str, str]], message: str) -> str:
    """The "Kept email #N" reply in ``history`` that a message refers to ("the thing Lena
    asked for", "the deadline from that email"): the newest whose sender or subject the
    message names, else the newest; '' when the message refers to no email's request, or
    there is none."""
    if not _REFERS_TO_EMAIL.search(message):
        return ""
    kept = [item["content"] for item in history if item.get("role") == "assistant" and _KEPT_EMAIL.match(item.get("content", ""))]
    if not kept:
        return ""
    wanted = content_words(message)
    for reply in reversed(kept):
        head = "\n".join(reply.splitlines()[:3])  # "Kept email #N.", "From: ...", "Subject: ..."
        if wanted and _shares(content_words(head), wanted):
            return reply
    return kept[-1]
