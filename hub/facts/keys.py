"""Fact keys from English wording ("my email is ..." → ``user.email``) and the cheap local
pre-filter that decides whether a message may hold a fact at all.

The key patterns read English, and in German, French and Spanish the few sentences people
most often say about themselves (where they live and work, their name, a relative's or a
pet's name: :data:`_OWN_I18N`). Another message in another language (``hub.routing.lexicon``
tells) passes the pre-filter when it uses a first-person word of its language, and the
model extractor reads it; its key is then the model's. Add a language's first-person
words to the lexicon, its key patterns here.
"""

from __future__ import annotations

import re
import unicodedata

from scopehub.hub.facts.text import APOSTROPHES, slug
from scopehub.hub.routing.lexicon import first_person, readable

# --------------------------------------------------------------------------- keys

_ATTR_SYNONYMS = {
    "e_mail": "email",
    "email_address": "email",
    "e_mail_address": "email",
    "mail": "email",
    "mail_address": "email",
    "email_id": "email",
    "phone_number": "phone",
    "mobile": "phone",
    "mobile_number": "phone",
    "cell": "phone",
    "cell_phone": "phone",
    "cellphone": "phone",
    "telephone": "phone",
    "telephone_number": "phone",
    "number": "phone",
    "time_zone": "timezone",
    "date_of_birth": "birthday",
    "birth_date": "birthday",
    "bday": "birthday",
    "home_town": "hometown",
    "surname": "last_name",
    "family_name": "last_name",
    "given_name": "first_name",
    "full_name": "name",
    "workplace": "office",
    "home_address": "address",
    "postal_address": "address",
    "company": "employer",
    "favorite": "favourite",
}
_ATTR_ADJECTIVES = {"new", "current", "updated", "correct", "real", "actual", "present", "latest"}
_NOT_OWNERS = {
    "it", "that", "what", "there", "here", "let", "who", "he", "she", "this", "where", "how", "when",
    "everyone", "everybody", "one", "nobody", "somebody", "someone", "today", "tomorrow", "why", "which", "you",
    "they", "them", "food", "place", "restaurant", "hotel", "menu", "dish", "all", "everything",
    # "Thursday works for me" is about a day, not about someone called Thursday.
    "monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday", "tonight", "weekend", "time",
    "january", "february", "march", "april", "june", "july", "august", "september", "october", "november", "december",
}  # fmt: skip
_RELATIONS = {
    "wife", "husband", "partner", "spouse", "son", "daughter", "child", "children", "kid", "kids", "mother",
    "father", "mom", "mum", "dad", "parent", "parents", "brother", "sister", "sibling", "friend", "boss",
    "manager", "colleague", "coworker", "assistant", "girlfriend", "boyfriend", "family", "fiance", "fiancee",
    "grandmother", "grandfather", "grandma", "grandpa", "uncle", "aunt", "cousin", "doctor", "dentist", "landlord",
}  # fmt: skip
_KIND_WORDS: tuple[tuple[str, frozenset[str]], ...] = (
    ("contact", frozenset({
        "email", "phone", "address", "telegram", "whatsapp", "signal", "skype", "handle", "website", "linkedin",
        "contact", "fax", "username",
    })),
    ("constraint", frozenset({
        "diet", "allergy", "allergies", "avoids", "dietary", "restriction", "restrictions", "medication",
        "condition", "disability", "accessibility", "intolerance",
    })),
    ("identity", frozenset({
        "name", "first_name", "last_name", "nickname", "age", "birthday", "birthplace", "home", "hometown", "city",
        "town", "country", "location", "office", "job", "title", "role", "employer", "team", "department",
        "language", "timezone", "pronouns", "nationality", "gender", "profession", "occupation",
    })),
    ("preference", frozenset({
        "favourite", "preferred", "preference", "preferences", "likes", "prefers", "seat", "airline", "airport",
        "cuisine", "food", "drink", "music", "colour", "color",
    })),
)  # fmt: skip
_DIETS = r"vegetarian|vegan|pescatarian|pescetarian|halal|kosher|gluten[- ]free|lactose[- ]intolerant|keto|paleo"
_VERBS = r"is|are|was|were|=|:|has become|became|changed to|has changed to|is now|are now|now is|now are"

_MY = re.compile(rf"\bmy\s+(?P<attr>[a-z][\w'-]*(?:\s+[a-z][\w'-]*){{0,2}}?)\s*(?:{_VERBS})(?:\s|$)", re.I)
_OUR = re.compile(rf"\bour\s+(?P<attr>[a-z][\w'-]*(?:\s+[a-z][\w'-]*){{0,2}}?)\s*(?:{_VERBS})(?:\s|$)", re.I)
_POSSESSIVE = re.compile(
    rf"\b(?P<owner>[a-z][\w-]*)'s\s+(?P<attr>[a-z][\w'-]*(?:\s+[a-z][\w'-]*){{0,2}}?)\s*(?:{_VERBS})(?:\s|$)", re.I
)
_I_AM = r"(?P<owner>[a-z][\w-]*)(?:'m|'re|'ve become| am| are| is| has become| have become)"
_DIET = re.compile(rf"\b{_I_AM}\s+(?:(?:not|no longer|now|also|a|an|strictly|fully|still|mostly)\s+)*(?:{_DIETS})\b", re.I)
_ALLERGY = re.compile(
    rf"\b{_I_AM}\s+(?:(?:not|no longer|also|very|severely|mildly)\s+)*allergic\s+to\s+(?P<what>[a-z][\w-]*(?:\s+[a-z][\w-]*)?)",
    re.I,
)
_AVOIDS = re.compile(r"\bi\s+(?:don't|do not|can't|cannot|never)\s+eat\s+(?P<what>[a-z][\w-]*)", re.I)
_LIVES = re.compile(
    r"\b(?P<owner>[a-z][\w-]*)(?:'m|'ve|'re| am| have| are| is| has)?\s+"
    r"(?:live|lives|living|reside|resides|based|moved|relocated)\s+(?:in|to|at)\b",
    re.I,
)
_WORKS = re.compile(r"\b(?P<owner>[a-z][\w-]*)(?:'m|'re| am| are| is)?\s+(?:work|works|working)\s+(?:at|for)\b", re.I)
# Whom one is a customer or member of, by the verb of what one does there: "I bank with Northway",
# "I shop at Lidl", "we're insured with Aviva", "I'm registered with Dr Patel", "I study at Leeds".
_WITH = re.compile(
    r"\b(?P<owner>i|we)(?:'m|'re| am| are)?\s+(?P<verb>bank|shop|study|train|volunteer|insured|registered|signed\s+up|"
    r"subscribed|enrolled|member|customer|client|banking|shopping|studying|training|volunteering)\s+(?:with|at|of|to)\s+(?:the\s+)?\S",
    re.I,
)
_JOB = re.compile(r"\b(?P<owner>[a-z][\w-]*)\s+(?:work|works)\s+as\b", re.I)
_NAME = re.compile(r"\b(?:call me|i'm called|i am called|my name's)\b", re.I)
_AGE = re.compile(r"\b(?:i'm|i am)\s+\d{1,3}(?:\s+years?\s+old)?\b", re.I)
_BORN = re.compile(r"\bi\s+was\s+born\s+(?P<prep>on|in)\s+(?P<next>\S+)", re.I)
_SPEAKS = re.compile(r"\bi\s+speak\b", re.I)
_IS_MY = re.compile(r"\b(?:is|are)\s+my\s+(?P<rel>[a-z]+)\b", re.I)
_LIKES = re.compile(r"\bi\s+(?:prefer|like|love|enjoy|hate|dislike|don't like|do not like)\b", re.I)


# The statements about oneself people make most, in German, French and Spanish, as
# (pattern, attribute): the attribute None takes the named thing's word ("Mein Hund heißt
# Bruno" -> user.hund). The small model's extractor cannot be trusted to read them, and
# the English patterns above never match them. Locations and employers are told apart by
# the preposition ("arbeite bei Siemens" / "in Hamburg"), so one does not replace the other.
_W = r"[^\W\d_][\w'-]*"
_OWN_I18N: tuple[tuple[re.Pattern[str], str | None], ...] = (
    (re.compile(r"\b(?:ich\s+)?heiße\b|\bmein\s+name\s+ist\b|\bje\s+m'appelle\b|\bmon\s+(?:pré)?nom\s+est\b"
                r"|\bme\s+llamo\b|\bmi\s+nombre\s+es\b", re.I), "name"),
    (re.compile(rf"\b(?:ich\s+)?wohne\b(?:\s+{_W}){{0,4}}?\s+(?:in|im|bei|am)\b|\bj'habite\b|\bje\s+(?:vis|réside|demeure)\s+(?:à|a|en|au|dans)\b"
                rf"|\b(?:yo\s+)?(?:vivo|resido)\b(?:\s+{_W}){{0,4}}?\s+en\b", re.I), "home"),
    (re.compile(r"\b(?:ich\s+)?arbeite\s+(?:bei|für)\b|\bje\s+travaille\s+(?:chez|pour)\b|\b(?:yo\s+)?trabajo\s+(?:para|con)\b", re.I), "employer"),
    (re.compile(r"\b(?:ich\s+)?arbeite\s+(?:in|im|am)\b|\bje\s+travaille\s+(?:à|a|en|au|dans)\b|\b(?:yo\s+)?trabajo\s+en\b", re.I), "office"),
    # "mon numéro de téléphone est ...", "mi número de teléfono es ...": the thing named may take a "de ..."
    (re.compile(rf"\b(?:mein|meine)\s+(?P<attr>{_W})\s+(?:heißt|ist)\s+\S|\b(?:mon|ma)\s+(?P<attr2>{_W})(?:\s+d[e']\s*{_W})?\s+(?:s'appelle|est)\s+\S"
                rf"|\bmi\s+(?P<attr3>{_W})(?:\s+de\s+{_W})?\s+(?:se\s+llama|es)\s+\S", re.I), None),
)


def own_key_i18n(text: str) -> str | None:
    """The attribute a German, French or Spanish statement about oneself names
    ("Ich wohne in Köln" -> ``home``, "Mi hija se llama Alba" -> ``hija``), else None."""
    text = text.translate(APOSTROPHES)
    for pattern, attr in _OWN_I18N:
        match = pattern.search(text)
        if match is None:
            continue
        if attr is not None:
            return attr
        named = next(value for value in (match.group("attr"), match.group("attr2"), match.group("attr3")) if value)
        # Keys are ASCII slugs: "frère" is kept as "frere", not cut to "fr_re".
        named = unicodedata.normalize("NFKD", named).encode("ascii", "ignore").decode()
        return _attr(named) or None
    return None


def normalise_key(raw: str | None, *, subject: str = "user") -> str | None:
    """A model's or person's key as ``subject.attribute``: lower case, dotted, at most 80 characters."""
    if not isinstance(raw, str):
        return None
    parts = [slug(part) for part in re.split(r"[.:/]+", raw)]
    parts = [part for part in parts if part]
    if not parts:
        return None
    if parts[0] in {"the_user", "person", "me", "i", "speaker", "customer", "self"}:
        parts[0] = "user"
    if len(parts) == 1:
        parts.insert(0, subject)
    parts[1] = _ATTR_SYNONYMS.get(parts[1], parts[1])
    return ".".join(parts)[:80].rstrip(".") or None


def _attr(raw: str) -> str:
    words = [w for w in raw.translate(APOSTROPHES).casefold().split() if w not in _ATTR_ADJECTIVES]
    parts = [slug(part) for part in " ".join(words).split("'s ")]
    parts = [_ATTR_SYNONYMS.get(part, part) for part in parts if part]
    return ".".join(parts)


def _owner(match: re.Match[str], subject: str) -> str | None:
    owner = match.groupdict().get("owner")
    if not owner:
        return subject
    owner = slug(owner)
    if owner in {"we", "i"}:
        return subject if owner == "i" else "we"
    if owner in _NOT_OWNERS:
        return None
    return owner


def kind_of_key(key: str | None) -> str:
    """The kind a key's attribute suggests (``user.email`` -> contact)."""
    if not key:
        return "other"
    words = set()
    for part in key.split(".")[1:]:
        words.add(part)
        words.update(part.split("_"))
    if words & _RELATIONS:
        return "relationship"
    for kind, vocabulary in _KIND_WORDS:
        if words & vocabulary:
            return kind
    return "other"


def infer_key(text: str, *, subject: str = "user") -> tuple[str | None, str]:
    """A local guess of a fact's key and kind, no model needed.

    "Ram's email is x" -> ("ram.email", "contact"); "my office is in Cyber Hub" ->
    ("user.office", "identity"); "I'm not vegetarian anymore" -> ("user.diet", "constraint").
    """
    text = text.translate(APOSTROPHES)
    key: str | None = None
    if match := _DIET.search(text):
        owner = _owner(match, subject)
        key = f"{owner}.diet" if owner else None
    elif match := _ALLERGY.search(text):
        owner = _owner(match, subject)
        key = f"{owner}.allergy.{slug(match['what'].split()[0])}" if owner else None
    elif match := _AVOIDS.search(text):
        key = f"{subject}.avoids.{slug(match['what'])}"
    elif _NAME.search(text):
        key = f"{subject}.name"
    elif match := _MY.search(text):
        attr = _attr(match["attr"])
        key = f"{subject}.{attr}" if attr else None
    elif match := _OUR.search(text):
        attr = _attr(match["attr"])
        key = f"we.{attr}" if attr else None
    elif (match := _POSSESSIVE.search(text)) and slug(match["owner"]) not in _NOT_OWNERS:
        attr = _attr(match["attr"])
        key = f"{slug(match['owner'])}.{attr}" if attr else None
    elif match := _LIVES.search(text):
        owner = _owner(match, subject)
        key = f"{owner}.home" if owner else None
    elif match := _JOB.search(text):
        owner = _owner(match, subject)
        key = f"{owner}.job" if owner else None
    elif match := _WORKS.search(text):
        owner = _owner(match, subject)
        key = f"{owner}.employer" if owner else None
    elif match := _WITH.search(text):
        owner = _owner(match, subject)
        verb = re.sub(r"ing$", "", match["verb"].split()[0].lower())
        key = f"{owner}.{_WITH_KEYS.get(verb, verb)}" if owner else None
    elif _AGE.search(text):
        key = f"{subject}.age"
    elif match := _BORN.search(text):
        birthday = match["prep"].lower() == "on" or match["next"][:1].isdigit()
        key = f"{subject}.{'birthday' if birthday else 'birthplace'}"
    elif _SPEAKS.search(text):
        key = f"{subject}.language"
    elif (match := _IS_MY.search(text)) and match["rel"].lower() in _RELATIONS:
        key = f"{subject}.{match['rel'].lower()}"
    elif _LIKES.search(text):
        return None, "preference"
    elif attr := own_key_i18n(text):
        key = f"{subject}.{attr}"
    key = normalise_key(key, subject=subject) if key else None
    return key, kind_of_key(key)


# --------------------------------------------------------------------------- cheap pre-filter

_EMAIL = re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+")
_PHONE = re.compile(r"\+?\d[\d\s().-]{6,}\d")
_WITH_KEYS = {"insured": "insurer", "registered": "registered_with", "signed": "signed_up_with", "subscribed": "subscription", "enrolled": "school", "train": "gym", "shopp": "shop", "studi": "school", "study": "school"}
_FACTLIKE = re.compile(
    "|".join(
        [
            rf"\bmy\s+(?:[\w'-]+\s+){{0,3}}?(?:{_VERBS}|changed|'s)(?:\s|$)",
            r"\bmy\s+[\w'-]+(?:\s+[\w'-]+){0,2}\s*:",
            r"\bi(?:'m| am)\s+(?!(?:going|gonna|trying|looking|wondering|not sure|sure|here|back|done|fine|good|ok|okay|"
            r"just|so|very|really|still looking|interested|asking|thinking|afraid|sorry|glad|happy|hoping)\b)\w",
            r"\bi\s+(?:live|work|bank|shop|study|moved|prefer|like|love|hate|dislike|speak|was born|don't eat|do not eat|can't eat|"
            r"cannot eat|never eat|have (?:a|an|two|three|\d+)|own)\b",
            r"\bcall me\b",
            r"\b(?:is|are)\s+my\b",
            r"\bwe(?:'re| are| live| work| prefer| have| moved)\b",
            r"\bour\s+(?:[\w'-]+\s+){0,3}?(?:is|are)\b",
            r"\b(?!(?:it|that|what|there|here|let|who|he|she|where|how|when|why)'s)[a-z][\w-]*'s\s+(?:[\w-]+\s+){0,2}(?:is|are)\b",
            r"\b(?:no longer|anymore|any more|from now on|remember that|please remember|note that|for the record)\b",
        ]
    ),
    re.I,
)
_CHANGE_WORDS = re.compile(r"\b(?:no longer|anymore|any more|from now on|actually|changed)\b", re.I)
_EXPLICIT = re.compile(
    r"\b(?:actually|correction|to be clear|no longer|any ?more|from now on|changed|has changed|instead|"
    r"update|updated|remember that|please remember|note that|for the record|is now|are now|"
    r"now (?:is|are|lives?|works?)|moved|new (?:e-?mail|phone|number|address|office|job|name))\b",
    re.I,
)


def looks_factual(text: str) -> bool:
    """Whether a message may state a lasting fact: a cheap local check, so most messages cost no model call."""
    text = text.translate(APOSTROPHES).strip()
    if not text or text.startswith("/") or (len(text.split()) < 2 and readable(text)):
        return False
    contact = bool(_EMAIL.search(text) or _PHONE.search(text))
    if text.endswith(("?", "？", "؟")) and not contact and not _CHANGE_WORDS.search(text):
        return False
    if not readable(text):
        # Patterns below read English; another language is let through when it speaks of
        # the person ("Ich bin Vegetarier", "Я вегетарианец"): the extractor reads it.
        return contact or first_person(text) or own_key_i18n(text) is not None
    # What the local key reader understands ("Priya lives in Pune") is worth one look too.
    return contact or bool(_FACTLIKE.search(text)) or infer_key(text)[0] is not None


def is_explicit(text: str) -> bool:
    """Whether the person states a change outright ("actually my email is ..."): may override /remember facts."""
    return bool(_EXPLICIT.search(text.translate(APOSTROPHES)))
