"""Arguments read off the message, without the model.

A 135M or 270M model asked to copy "the dry cleaning" out of "also I need to pick up the
dry cleaning on saturday" copies the wrong run, or the listing it saw last. Most
arguments people give have a shape that needs no model:

- the text after a short lead-in ending in a colon ("note: call the bank", "jot this
  down: ...", "new task: ..."), or in quotes ("add 'renew my passport'");
- the text after a word the tool's own demonstrations put just before their value
  ("reply to Tom *saying* ...", "note *that* ...");
- otherwise the message without its request words ("can you add", "I need to",
  "remind me to") and its closing words ("to my to-do list", ", put it on my list");
- a day (``due``) or a moment (``when``) said in the message, in English or in the
  German, French and Spanish the date parser reads, taken out of the text.

Which parameter is which follows the tool's schema, not its name: one required free-text
string, optional or required date or time parameters (their name or description says
so). A tool with another shape (several free texts, a team to name) is left to the model.
Everything here is pure text work.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from scopehub.agents import date_spans, parse_time, to_english
from scopehub.hub.models.grammar import parameters_of, required_of
from scopehub.hub.models.references import content_words
from scopehub.hub.routing.lexicon import PASS_ON_ES, TELL_ES

__all__ = ["action_items", "addressed_arguments", "anchors_of", "arguments_for", "date_of", "free_text", "item_numbers", "items_said", "opens_keeping", "team_of"]

TRAILING = ".!?,;: "
# A lead-in of a few words closed by a colon: "note:", "jot this down:", "Neue Aufgabe:".
_COLON_HEAD = re.compile(r"^\s*(?P<head>[^:\n\d]{1,40}?)\s*:\s+(?P<rest>\S.*)$", re.S)
_QUOTED = re.compile(
    r"(?:^|(?<=\s))(?:'([^'\n]{2,}?)'|\"([^\"\n]{2,}?)\"|«\s*([^»\n]{2,}?)\s*»|„([^“\n]{2,}?)“|“([^”\n]{2,}?)”)(?=$|[\s.,!?;:])"
)
# Words that open a request without being part of what is asked for, in the router's languages.
_FILLER = r"(?:also|and|oh|ok|okay|so|hey|hi|please|pls|now|then|bitte|mal|auch|noch|s'il te plaît|stp|aussi|por favor|también)"
_ASK = r"(?:(?:can|could|would|will) you|kannst du|könntest du|peux-tu|pourrais-tu|puedes|podrías)"
_NEED = (
    r"(?:i (?:really |also |still )?(?:need|have|want|got|ought) to|i must|i should|i've got to|i gotta|don't forget to|remember to|"
    r"ich muss|ich sollte|ich will|je dois|il faut que je|tengo que|debo|necesito)"
)
# The verb of a request to keep something, first ("add", "setz", "ajoute", "apunta que").
_KEEP_VERB = (
    r"(?:add|put|stick|create|jot\s+down|write\s+down|note\s+down|note\s+that|note(?=\s+(?:ça|ca|cela|ceci|this|it)\b)|setz(?:e)?|füge?|trag(?:e)?|(?:notiere|notier)(?:\s+dir)?(?:,?\s+dass)?|schreib(?:e)?(?:\s+auf)?|"
    r"ajoute[rz]?|mets|mettre|note\s+que|noter|écris|écrire|añade|añadir|agrega|pon|apunta(?:\s+que)?|anota(?:\s+que)?|escribe|"
    # "keep this as a task"; Spanish imperatives carry their pointer: "apúntalo", "añádelo", "ponlo", "anótamelo"
    r"keep(?=\s+(?:that|this|it)\b)|(?:apúnta|anóta|añáde|agréga|guárda|escríbe)(?:me)?(?:lo|la|los|las)|pon(?:me)?(?:lo|la|los|las))"
)
_LEAD = re.compile(
    rf"^\s*(?:{_FILLER}[,!\s]+)*(?:{_ASK}\s+)?(?:{_FILLER}[,\s]+)*(?:{_NEED}\s+(?:{_FILLER}\s+)*)?(?:{_KEEP_VERB}(?:\s+|$)(?:{_FILLER}\s+)?)?",
    re.I,
)
# The same opening up to the keep verb ("can you add", "I need to put", "Apunta que"): a
# request to store something.
_OPENS_KEEPING = re.compile(
    rf"^\s*(?:{_FILLER}[,!\s]+)*(?:{_ASK}\s+)?(?:{_FILLER}[,\s]+)*(?:{_NEED}\s+)?{_KEEP_VERB}\b", re.I
)
# Closing words that say where the item goes, not what it is.
_PLACE = (
    r"(?:(?:my|the|our)\s+)?(?:to-?do(?:\s+list)?|todos?|tasks?(?:\s+list)?|(?:shopping\s+|grocery\s+)?list|notes?|reminders?)"
    r"|(?:meine[rn]?|die)\s+(?:\w+)?liste|(?:meine[rn]?|die)\s+aufgaben|ma\s+liste(?:\s+de\s+\w+)?|mes\s+tâches|mi\s+lista|mis\s+tareas"
)
_CLOSING = re.compile(
    rf"(?:[,;]?\s*(?:and\s+|und\s+|et\s+|y\s+)?(?:please\s+)?(?:put|add|set|write|save|setz|setze|füge|mets|ajoute|pon|añade)\s+"
    rf"(?:it|that|this|them|das|es|le|la|lo)\s+(?:on|to|in|onto|auf|zu|in|sur|à|dans|en|a)\s+(?:{_PLACE})(?:\s+hinzu)?"
    rf"|[,;]?\s*(?:(?:and\s+)?(?:put|add|set|save|write)\s+(?:it|that|this)\s+)?(?:as\s+a\s+(?:task|to-?do|note)"
    rf"|como\s+(?:una\s+)?(?:tarea|nota|pendiente)|comme\s+(?:une\s+)?(?:tâche|note)|als\s+(?:eine\s+)?(?:aufgabe|notiz|todo))"
    rf"|[,;]?\s*please"
    rf"|\s+(?:on|to|in|onto|into|auf|zu|sur|à|dans|en|a)\s+(?:{_PLACE})(?:\s+hinzu(?:fügen)?|\s+setzen|\s+schreiben)?)\s*[.!?]*\s*$",
    re.I,
)
# A date parameter names a day or a moment ("due", "when") or describes one.
_DATE_NAME = re.compile(r"^(?:due|when|date|deadline|day|at|time)$", re.I)
_DATE_DESCRIPTION = re.compile(r"\b(?:tomorrow|yyyy-mm-dd|iso datetime|in 10 minutes)\b", re.I)
_TIME_WORDS = re.compile(
    r"\bin\s+(?:\d+|an?|one|two|three|five|ten|half an?)\s*(?:minutes?|mins?|hours?|hrs?)\b", re.I
)
_REPEAT = re.compile(
    r"\b(?:every|each|daily|weekly|hourly|jeden|jede|alle|chaque|tous les|toutes les|cada)\b", re.I
)
# "remind me to", "erinnere mich daran", "rappelle-moi de", "recuérdame": the request, not its text.
_REMIND = re.compile(
    r"^\s*(?:please\s+)?(?:(?:can|could) you\s+)?(?:remind\s+me|erinnere?\s+mich|rappelle[- ]moi|me\s+rappeler|recuérdame|recuerdame)"
    r"(?:\s+(?:to|that|about|of|daran|an|de|d'|à|que|a))?\s*",
    re.I,
)
_ITEM_NUMBER = re.compile(
    r"#\s?(\d{1,9})\b|\b(?:task|note|email|e-mail|mail|reminder|item|number|no\.?|nr\.?|n°|aufgabe|notiz|erinnerung|tâche|rappel|tarea|nota|"
    r"correo|recordatorio)\s+(\d{1,9})\b",
    re.I,
)
_ACTION_LINE = re.compile(r"^-\s+(?P<text>.+)$")
_POLITE = re.compile(
    r"^\s*(?:(?:hi|hello|hey)\b[^,.!]*[,.!]\s*)?(?:please\s+|(?:could|can|would) you(?: please)?\s+|kannst du(?: bitte)?\s+|"
    r"pourrais-tu\s+|peux-tu\s+|podrías\s+|puedes\s+|por favor\s+)",
    re.I,
)
# Function words never taken for the word just before a demonstration's value.
_NO_ANCHOR = frozenset(
    {"to", "the", "a", "an", "my", "on", "of", "for", "in", "is", "it", "and", "i", "me", "you"}
)


def _clean(text: str) -> str:
    return " ".join(text.split()).strip(TRAILING)


def is_date_parameter(name: str, schema: Mapping[str, Any]) -> bool:
    """Whether a string parameter names a day or a moment (``due``, ``when``)."""
    return bool(
        _DATE_NAME.match(name) or _DATE_DESCRIPTION.search(str(schema.get("description") or ""))
    )


def anchors_of(demos: Iterable[Any]) -> frozenset[str]:
    """The words a tool's demonstrations put just before a free-text value ("saying",
    "that"): where the value starts in a message that has one."""
    found: set[str] = set()
    for demo in demos:
        arguments = getattr(demo, "arguments", None) or {}
        text = str(getattr(demo, "text", "")).casefold()
        for value in arguments.values():
            if not isinstance(value, str) or len(value.split()) < 2:
                continue
            at = text.find(value.casefold())
            if at <= 0:
                continue
            before = text[:at].rstrip()
            if before.endswith(":"):
                continue  # the colon rule finds it anyway
            words = before.split()
            if words and words[-1] not in _NO_ANCHOR and words[-1].isalpha():
                found.add(words[-1])
    return frozenset(found)


def free_text(message: str, anchors: Iterable[str] = (), framing: Iterable[str] = ()) -> str:
    """The item a request names: after a colon lead-in, in quotes, after one of the tool's
    ``anchors``, or the message without request and closing words (see the module docstring)."""
    text = _CLOSING.sub("", message.strip()) or message.strip()
    head = _COLON_HEAD.match(text)
    if head and len(head["head"].split()) <= 5:
        return _clean(_CLOSING.sub("", head["rest"]))
    quoted = _QUOTED.search(text)
    if quoted:
        return _clean(next(group for group in quoted.groups() if group))
    words = text.split()
    wanted = {anchor.casefold() for anchor in anchors}
    for index, word in enumerate(words[:10]):
        if word.casefold().strip(TRAILING) in wanted and index + 1 < len(words):
            return _clean(_CLOSING.sub("", " ".join(words[index + 1 :])))
    rest = _CLOSING.sub("", _LEAD.sub("", text, count=1))
    # The request's own verb and words ("add", "put", "jot down") at either end.
    loose = {word.casefold() for word in framing}
    kept = rest.split()
    while len(kept) > 1 and kept[0].casefold().strip(TRAILING) in loose:
        kept.pop(0)
    while len(kept) > 1 and kept[-1].casefold().strip(TRAILING) in loose:
        kept.pop()
    return _clean(" ".join(kept)) or _clean(text)


def date_of(text: str) -> tuple[str | None, str]:
    """The first day ``text`` names (as English words ``parse_date`` reads) and the text
    without it; (None, text) when it names none."""
    english = to_english(text)
    spans = date_spans(english)
    if not spans:
        return None, text
    start, end, phrase = spans[0]
    return phrase, _clean(english[:start] + " " + english[end:])


def moment_of(text: str) -> tuple[str | None, str]:
    """A reminder's moment in ``text`` ("tomorrow at 8am", "in 20 minutes", "friday at
    10am") and the text without it; (None, text) when it names none or repeats."""
    english = to_english(text)
    if _REPEAT.search(english):
        return None, text  # "every monday": the schedule is the model's to write
    duration = _TIME_WORDS.search(english)
    if duration:
        return duration[0], _clean(english[: duration.start()] + " " + english[duration.end() :])
    parts: list[str] = []
    spans = date_spans(english)
    cut: list[tuple[int, int]] = []
    if spans:
        start, end, phrase = spans[0]
        parts.append(phrase)
        cut.append((start, end))
    clock = parse_time(english)
    if clock is not None:
        (start, end) = clock[1]
        at = re.search(r"\bat\s*$", english[:start])
        cut.append((at.start() if at else start, end))
        parts.append("at " + english[start:end])
    if not parts:
        return None, text
    rest = english
    for start, end in sorted(cut, reverse=True):
        rest = rest[:start] + " " + rest[end:]
    return " ".join(parts), _clean(rest)


def action_items(email_reply: str) -> list[str]:
    """The "Action items:" lines of a kept email's reply, without their polite opening."""
    lines = email_reply.splitlines()
    try:
        start = next(i for i, line in enumerate(lines) if line.startswith("Action items:"))
    except StopIteration:
        return []
    items = []
    for line in lines[start + 1 :]:
        match = _ACTION_LINE.match(line.strip())
        if match:
            items.append(_clean(_POLITE.sub("", match["text"])))
    return [item for item in items if item]


# The item nouns of _ITEM_NUMBER in English, as the tools name their items ("read_note").
_ITEM_NOUNS = {
    "task": "task", "aufgabe": "task", "tâche": "task", "tarea": "task",
    "note": "note", "notiz": "note", "nota": "note",
    "email": "email", "e-mail": "email", "mail": "email", "correo": "email",
    "reminder": "reminder", "erinnerung": "reminder", "rappel": "reminder", "recordatorio": "reminder",
}  # fmt: skip


# One item of a kind, said with a determiner ("the last email", "die E-Mail", "la note",
# "el correo"), or items of a kind in the plural ("my emails", "Notizen", "mes notes").
_ONE_NOUN = "|".join(sorted(map(re.escape, _ITEM_NOUNS), key=len, reverse=True))  # the longest first: "e-mail" before "mail"
_ONE_ITEM = re.compile(
    r"\b(?:the|this|that|die|der|das|diese[nrs]?|la|le|cette|ce|el|este|esta|ese|esa|l['’])\s*"
    rf"(?:[^\W\d]+\s+){{0,2}}?(?P<noun>{_ONE_NOUN})(?![-\w])",
    re.I,
)
_MANY_NOUNS = {
    "tasks": "task", "aufgaben": "task", "tâches": "task", "tareas": "task",
    "notes": "note", "notizen": "note", "notas": "note",
    "emails": "email", "e-mails": "email", "mails": "email", "correos": "email",
    "reminders": "reminder", "erinnerungen": "reminder", "rappels": "reminder", "recordatorios": "reminder",
}  # fmt: skip
_MANY_ITEMS = re.compile(rf"(?<![-\w])(?P<noun>{'|'.join(_MANY_NOUNS)})(?![-\w])", re.I)


def items_said(message: str) -> tuple[set[str], set[str]]:
    """The kinds of item the message names one of ("the last email" -> {"email"}) and
    the kinds it names in the plural ("Affiche mes notes" -> {"note"}), as the tools name
    their items ("read_email", "list_notes")."""
    one = {_ITEM_NOUNS[match["noun"].lower()] for match in _ONE_ITEM.finditer(message)}
    many = {_MANY_NOUNS[match["noun"].lower()] for match in _MANY_ITEMS.finditer(message)}
    return one, many


def item_nouns(message: str) -> set[str] | None:
    """The kinds of item the message names by number ("note 5" -> {"note"}, "Zeig Notiz 3"
    too); None when a number names an item of no stated kind ("#4", "number 3"); empty
    when no item is named by number."""
    nouns: set[str] = set()
    for match in _ITEM_NUMBER.finditer(message):
        word = re.match(r"[^\W\d]+(?:-\w+)?", match[0].lower())
        noun = _ITEM_NOUNS.get(word[0]) if word else None
        if noun is None:
            return None
        nouns.add(noun)
    return nouns


# German puts the verb last: "... auf meine Liste setzen", "'Fenster putzen' hinzufügen", "... notieren".
_ENDS_KEEPING = re.compile(
    r"\b(?:(?:auf|in|zu)\s+(?:meine[rn]?|die|der)\s+\w*(?:liste|aufgaben)\s+(?:setzen|schreiben|packen|tun|nehmen|aufnehmen|eintragen)"
    r"|hinzufügen|hinzuzufügen|aufschreiben|notieren|eintragen|aufnehmen)\s*[?.!]*\s*$",
    re.I,
)


def ends_keeping(message: str) -> bool:
    """Whether the message ends with a German verb of keeping ("... auf meine Liste setzen",
    "... hinzufügen", "... notieren"): the verb-last form of "add" and "note"."""
    return _ENDS_KEEPING.search(message) is not None


def opens_keeping(message: str) -> bool:
    """Whether the message opens with a verb of keeping something ("add", "put", "jot down",
    "note that", "setz", "ajoute", "apunta que"), after "please", "can you", "I need to"."""
    return _OPENS_KEEPING.match(message) is not None


def item_numbers(message: str) -> list[int]:
    """Numbers the message gives as an item's number ("task 3", "#4", "note 2"), not as
    a time or an amount ("Saturday at 7")."""
    return [int(match[1] or match[2]) for match in _ITEM_NUMBER.finditer(message)]


def _roles(function: Mapping[str, Any]) -> tuple[str | None, list[str], list[str]] | None:
    """The one free-text parameter, the date parameters and the required ones, when the
    schema has the shape read here; None otherwise."""
    properties = parameters_of(function).get("properties") or {}
    required = required_of(function)
    free: list[str] = []
    dates: list[str] = []
    for name, schema in properties.items():
        if not isinstance(schema, Mapping):
            return None
        if schema.get("type") == "string" and "enum" not in schema:
            (dates if is_date_parameter(name, schema) else free).append(name)
    free_required = [name for name in free if name in required]
    if len(free_required) != 1 or any(name not in free and name not in dates for name in required):
        return None
    return free_required[0], dates, required


def arguments_for(
    function: Mapping[str, Any],
    message: str,
    *,
    anchors: Iterable[str] = (),
    framing: Iterable[str] = (),
    earlier: str = "",
) -> dict[str, Any] | None:
    """The tool's arguments read off ``message`` (and the email ``earlier`` it refers to),
    or None when the schema or the message has another shape (the model writes them)."""
    roles = _roles(function)
    if roles is None:
        return addressed_arguments(function, message, earlier)
    free, dates, required = roles
    arguments: dict[str, Any] = {}
    source = ""
    text = message
    if earlier:
        own = free_text(_POINTERS.sub(" ", message), anchors, framing)
        if content_words(_POINTING.sub(" ", _LEAD.sub("", own, count=1))) and not _POINTERS.fullmatch(own):
            # "put the appointment from that email on my tasks": the item is the message's,
            # the day the email's when the message names none.
            text = own
            day = date_of(message)[0] or _email_day(earlier)
            if day and dates and dates[0] not in required:
                arguments[dates[0]] = day
        else:
            # "add the thing Lena asked for": the email's request is the item, its day the date.
            items = action_items(earlier)
            if not items:
                return None
            source = text = _pick_item(items, message)
            sender = _sender_name(earlier)
            if sender:
                source = text = re.sub(
                    r"\bme\b", sender, text
                )  # "send me the figures" was Lena's "me"
            subject = _subject(earlier)
            if subject and not content_words(subject) & content_words(text):
                # "Book online or give us a call" says nothing of what: the email's subject does.
                source = text = f"{subject}: {text}"
    for name in dates:
        if name in arguments:
            continue
        moment = name in required
        found, rest = (moment_of if moment else date_of)(text)
        if found is None:
            if name in required:
                return None
            continue
        arguments[name] = found
        text = rest
    if not source and _REMIND.match(text):
        text = _REMIND.sub(
            "", text, count=1
        )  # "remind me to ...": the request, not what to remind of
    value = _clean(text) if source else free_text(text, anchors, framing)
    if not value:
        return None
    arguments[free] = value
    return arguments


# Words that only point back, in the four languages ("Ajoute ça à mes tâches", "Apunta eso"),
# and the particles of their verbs ("write that down", "Schreib das auf"): no item of the message's own.
_POINTING = re.compile(r"(?<!\w)(?:that|this|it|them|das|es|dies|ça|ca|cela|ceci|eso|esto|lo|la|down|up|auf)(?!\w)", re.I)
# Words that point at an email's request rather than name an item.
_POINTERS = re.compile(
    r"\b(?:the\s+(?:thing|stuff|task|request)\s+|what\s+)(?:[\w'’]+\s+){0,2}?(?:asked|asks|wants?|wanted|needs?|needed|requested)"
    r"(?:\s+(?:for|me\s+to\s+do|me\s+for|me\s+to))?\b"
    r"|\b(?:the\s+)?deadline\b"
    r"|\b(?:from|in|of)\s+(?:the|that|this|her|his|their|last|[\w]+['’]s)\s+(?:e-?mail|mail|message)\b",
    re.I,
)


def _field(reply: str, name: str) -> str | None:
    """The value of a kept email's reply line ``name: value`` (the first such line); None without one."""
    prefix = f"{name}:"
    for line in reply.splitlines():
        if line.startswith(prefix):
            return line[len(prefix) :]
    return None


def _sender_name(reply: str) -> str:
    """The first name of a kept email's sender ("From: Lena Fischer <lena@...>" -> "Lena")."""
    sender = _field(reply, "From")
    if sender is None:
        return ""
    name = sender.split("<")[0].strip().strip('"')
    first = name.split()[0] if name.split() else ""
    return first if first.isalpha() and "@" not in name and first.lower() != "unknown" else ""


def _subject(reply: str) -> str:
    """A kept email's subject ("Subject: MOT reminder" -> "MOT reminder"); '' when it has none."""
    return (_field(reply, "Subject") or "").strip()


def _email_day(reply: str) -> str | None:
    """The first day a kept email's reply lists ("Dates: Tuesday = Tue 2026-12-08")."""
    dates = _field(reply, "Dates")
    if dates is None:
        return None
    return dates.split(";")[0].split("=")[0].strip() or None


def _pick_item(items: Sequence[str], message: str) -> str:
    """The action item the message names by a word, else the first."""
    wanted = content_words(message)
    for item in items:
        if wanted & content_words(item):
            return item
    return items[0]


# --------------------------------------------------------------------------- a team addressed

# "tell the ops team ...", "let the sales team know ...", "Sag dem Support-Team ...", "Gib dem
# Vertrieb Bescheid ...", "Préviens l'équipe RH ...", "Avisa al equipo de soporte ...": the
# team named, then what to pass on. The first pattern that names a team wins.
_TEAM_WORD = r"[^\W_][\w.-]{0,40}?"
# "dem Vertriebsteam", "ans Support-Team": a German compound, whose joining s is no part of the name.
_TEAM_COMPOUND = re.compile(rf"\b(?:dem|den|das|ans|an\s+das)\s+(?P<team>{_TEAM_WORD})-?team\b", re.I)
_TEAM_PATTERNS = (
    re.compile(rf"\b(?:dispatch|send|forward|hand)\s+(?:this\s+|it\s+)?(?:over\s+)?to\s+(?:the\s+)?(?P<team>{_TEAM_WORD})(?:\s+team)?\s*:", re.I),
    re.compile(rf"\b(?:the|our|my)\s+(?P<team>{_TEAM_WORD})\s+team\b", re.I),
    re.compile(rf"\b(?P<team>{_TEAM_WORD})\s+team\b", re.I),
    _TEAM_COMPOUND,
    re.compile(rf"\b(?:dem|den|das)\s+team\s+(?P<team>{_TEAM_WORD})\b", re.I),
    re.compile(rf"\bl['’]\s?équipe\s+(?:de\s+(?:la\s+)?|du\s+|des\s+|d['’]\s?)?(?P<team>{_TEAM_WORD})\b", re.I),
    re.compile(rf"\b(?:el|al|del)\s+equipo\s+(?:de\s+(?:la\s+|los\s+|las\s+)?|del\s+)?(?P<team>{_TEAM_WORD})\b", re.I),
    re.compile(rf"\bau\s+service\s+(?:de\s+|du\s+)?(?P<team>{_TEAM_WORD})\b", re.I),
    # "Sag dem Vertrieb ...", "Gib der Buchhaltung Bescheid": a German request to a department.
    re.compile(rf"^\s*(?:bitte\s+)?(?:sag|sage|gib|schreib|schreibe|frag|frage|informiere|melde)\s+(?:bitte\s+)?(?:dem|der|den)\s+(?P<team>{_TEAM_WORD})\b", re.I),
    # Passing something on to a department named without "team": "pass it on to accounting",
    # "Leite das an die Buchhaltung weiter", "Transmets ça au service compta", "Avisa a soporte".
    re.compile(
        rf"\b(?:pass|forward|send|hand|give)\s+(?:it|this|that|these|them)\s+(?:on\s+|over\s+|along\s+)?to\s+(?!(?:me|us|myself)\b)(?:the\s+)?(?P<team>{_TEAM_WORD})\b"
        rf"|\b(?:pass|hand)\s+(?:it\s+|this\s+|that\s+)?(?:on|over|along)\s+to\s+(?!(?:me|us|myself)\b)(?:the\s+)?(?P<team2>{_TEAM_WORD})\b",
        re.I,
    ),
    re.compile(rf"\b(?:leite|leit|schick|schicke|reich|reiche|gib|gebe)\s+(?:das|es|dies|sie|ihn)\s+(?:bitte\s+)?(?:weiter\s+)?an\s+(?:die|den|das|dem)\s+(?P<team>{_TEAM_WORD})\b", re.I),
    re.compile(rf"\b(?:transmets|transmettez|transfère|fais\s+suivre|faites\s+suivre|passe|envoie)\s+(?:ça|ca|cela|le|la|les)\s+(?:à|a|au|aux)\s+(?:la\s+|le\s+)?(?P<team>{_TEAM_WORD})\b", re.I),
    re.compile(
        rf"(?:^\s*(?:{TELL_ES})|\b(?:{PASS_ON_ES}))"
        rf"\s+(?:a|al)\s+(?!m[ií]\b)(?:la\s+|los\s+)?(?P<team>{_TEAM_WORD})\b",
        re.I,
    ),
)
# Words between the team and what to pass on: "know", "that", "dass", "que", "Bescheid", "to".
_PASS_ON = re.compile(
    r"^\s*(?:[,:;.-]\s*)*(?:(?:know|about|bescheid|for|to|that|dass|daß|que|de\s+que|qu['’]|:)\b[,:]?\s*|[,:;-]\s*)*",
    re.I,
)


# What is left of "Pásaselo al equipo de ...", "Transmets ça à l'équipe RH", "Leite das an die
# Buchhaltung weiter" once the team is taken: the verb and its pointer, nothing to pass on.
_NOTHING_PASSED = re.compile(
    rf"(?:\s*(?:{PASS_ON_ES}|transmets|transmettez|transfère|"
    r"fais\s+suivre|passe|envoie|ça|ca|cela|à|a|au|aux|weiter|weiterleiten|leite|leit|das|es|dies|pass|forward|send|hand|"
    r"it|this|that|on|over|along|please|bitte|s'il\s+te\s+plaît|por\s+favor)[\s,.!]*)*",
    re.I,
)
_ASKING_AT_END = re.compile(
    r"[,;]?\s*(?:(?:and|please|und|bitte|et|y)\s+)*(?:tell|let|ask|notify|ping|send|forward|hand|inform|sag|sage|gib|dis|préviens|avisa|dile|informa)"
    r"(?:\s+(?:it|this|that|das|es|le|lo)(?:\s+(?:to|an|à|a))?)?\s*$",
    re.I,
)


def team_of(message: str) -> tuple[str, str] | None:
    """The team a message addresses and what it asks to pass on ("let the sales team know
    the price list is out" -> ("sales", "the price list is out")); None when it names no team."""
    for pattern in _TEAM_PATTERNS:
        match = pattern.search(message)
        if match is None:
            continue
        raw = (match["team"] or match.groupdict().get("team2") or "").strip(".-")
        if raw.casefold() in {"the", "a", "this", "that", "team", "le", "la", "el", "die", "der", "dem"}:
            continue
        if pattern is _TEAM_COMPOUND and raw.lower().endswith("s") and len(raw) > 5:
            raw = raw[:-1]  # "Vertriebsteam": the joining s is no part of the name
        team = unicodedata.normalize("NFKD", raw).encode("ascii", "ignore").decode().lower()
        if not re.fullmatch(r"[a-z0-9][a-z0-9._-]{0,63}", team):
            continue
        head = _COLON_HEAD.match(message)
        if head and len(head["head"].split()) <= 8 and head.start("rest") > match.start():
            said = head["rest"]
        else:
            said = message[match.end() :]
            said = _PASS_ON.sub("", said, count=1)
            if not content_words(said):
                said = _ASKING_AT_END.sub("", message[: match.start()])  # "the printer is broken, tell the ops team"
                said = _LEAD.sub("", said, count=1)
        said = _clean(said)
        if _NOTHING_PASSED.fullmatch(said):
            said = ""  # only the words of passing on ("Pásaselo", "Transmets ça à", "weiter")
        if not said:
            # "pass it on to accounting": the team is named, what to pass on is what came before.
            return team, ""
        return team, said
    return None


def _team_parameter(name: str, schema: Mapping[str, Any]) -> bool:
    return name in {"to", "team"} or "team" in str(schema.get("description") or "").lower()


def addressed_arguments(function: Mapping[str, Any], message: str, earlier: str = "") -> dict[str, Any] | None:
    """The arguments of a tool that hands something to a team (one required string names
    the team, the other required strings say what to pass on), read off ``message``;
    None for another shape or a message that names no team."""
    properties = parameters_of(function).get("properties") or {}
    required = required_of(function)
    teams = [name for name in required if isinstance(properties.get(name), Mapping) and _team_parameter(name, properties[name])]
    others = [name for name in required if name not in teams]
    if len(teams) != 1 or not others:
        return None
    if any(not isinstance(properties.get(name), Mapping) or properties[name].get("type") != "string" for name in others):
        return None
    found = team_of(message)
    if found is None:
        return None
    team, said = found
    if not said:
        # Nothing said besides the team ("forward it to accounting"): pass on the email the
        # message points back at, else the message itself, so the team still gets it.
        said = _clean(_passed_on(earlier) or message)
    return {teams[0]: team, **{name: said for name in others}}


def _passed_on(earlier: str) -> str:
    """What an earlier email's reply asks (its action items), else its subject line."""
    items = action_items(earlier)
    if items:
        return "; ".join(items)
    for line in earlier.splitlines():
        if line.lower().startswith("subject:"):
            return line.split(":", 1)[1].strip()
    return ""
