"""Small text helpers shared by the router and the context builder (pure)."""

from __future__ import annotations

import re
from functools import lru_cache

__all__ = [
    "FUNCTION_WORDS",
    "STOPWORDS",
    "about_the_bot",
    "adds_something",
    "announces_question",
    "asks_reply",
    "asks_whats_left",
    "back_reference",
    "content_terms",
    "correction_opening",
    "deictic_nouns",
    "first_person",
    "keeps_what_was_said",
    "language_of",
    "opens_addition",
    "readable",
    "stem",
    "switch_cue",
    "terms",
    "without_addition",
    "without_politeness",
]

# Letters and the combining marks of scripts that write vowels as marks (Devanagari and the
# other Indic scripts, Thai, Arabic and Hebrew points): "मुझे" is one word, not four.
_LETTER = r"(?:[^\W_]|[\u0300-\u036f\u0483-\u0489\u0591-\u05c7\u0610-\u061a\u064b-\u065f\u0670\u06d6-\u06ed\u0900-\u0dff\u0e31-\u0e4e\u3099\u309a])"
_WORD_RE = re.compile(rf"{_LETTER}+(?:['’]{_LETTER}+)?", re.UNICODE)

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


# Scripts written without spaces between words: a run of them is cut into overlapping
# character pairs (the usual way to index Chinese and Japanese), so "タスクを追加" shares
# "タス", "スク" with the keyword "タスク".
_UNSPACED_RE = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\u0e00-\u0e7f\u0e80-\u0eff\u1000-\u109f]+")


# Arabic short-vowel marks and the stretching tatweel are optional in writing: "ذكّرني" is "ذكرني".
_OPTIONAL_MARKS_RE = re.compile(r"[\u064b-\u065f\u0670\u0640]")


# French "rappeler" is "to remind" only with whom it reminds ("Rappelle-moi demain ..."); with a
# subject of its own ("il faut que je rappelle le plombier", "je rappelle ma banque") it is "to
# call back": read as "appeler", so the duty does not reach the reminders, which need a moment.
_CALL_BACK_FR = re.compile(r"\b(je|tu|on|nous|vous)\s+rappel(?=le\b|les\b|ons\b|ez\b|er\b|lerai\b)")


def terms(text: str) -> list[str]:
    """Lower-cased word tokens of ``text`` (any script; unspaced scripts as character pairs)."""
    words = []
    for match in _WORD_RE.finditer(_CALL_BACK_FR.sub(r"\1 appel", _OPTIONAL_MARKS_RE.sub("", text.lower()))):
        word = match.group(0).replace("’", "'")
        if _UNSPACED_RE.search(word) is None:
            words.append(word)
            continue
        for piece in re.split(f"({_UNSPACED_RE.pattern})", word):
            if not piece:
                continue
            if _UNSPACED_RE.fullmatch(piece):
                words.extend(piece[i : i + 2] for i in range(max(1, len(piece) - 1)))
            else:
                words.append(piece)
    return words


def content_terms(text: str) -> list[str]:
    """Stemmed tokens of ``text`` without stopwords and one-letter words."""
    return list(_content_terms(text))


# Every turn reads the same window of stored messages again (also_sees reads each of its
# 40 messages: 44 reads a message), so their terms are kept; a webhook message's CPU on
# SQLite fell from 9.98 to 8.08 ms (bench hub, side by side). Callers get their own list.
@lru_cache(maxsize=8192)
def _content_terms(text: str) -> tuple[str, ...]:
    return tuple(stem(word) for word in terms(text) if word not in STOPWORDS and (len(word) > 1 or not word.isascii()))


# -- Which language a message is in --------------------------------------------------------
# The shortcuts below (and the fact pre-filter's patterns) read English. A message the
# lexicon cannot read is left to the scorers (embeddings, character n-grams of examples
# in its language) and the conversation state; it must never be held by an English rule
# ("no known content word, so stay"). Detection is cheap: the script of its letters, then
# which language's function words it uses most. Add a language by adding its list.
def _listed(words: str) -> frozenset[str]:
    return frozenset(words.split())


FUNCTION_WORDS: dict[str, frozenset[str]] = {
    "en": STOPWORDS,
    "de": _listed(
        "ich du er sie wir ihr mich mir dich dir uns euch mein meine meinen meinem meiner dein deine der das den dem des "
        "ein eine einen einem einer und oder aber nicht kein keine ist sind bin bist war hat habe haben mit für auf aus "
        "bei nach von zu zum zur im ins vom über unter vor wie was wer wo wann warum bitte danke ja nein auch noch schon "
        "morgen heute gestern jetzt dann dass diese dieser dieses alle etwas nichts kann kannst möchte würde soll am "
        # German's own "in", "an" and "um" ("Ich wohne in Köln"): shared with English, they
        # only tie a short German sentence with English, which then wins no longer.
        "in an um"
    ),
    "fr": _listed(
        "je tu il elle nous vous ils elles moi toi mon ma mes ton ta tes son sa ses notre nos votre vos le la les un une "
        "des du de et ou mais ne pas est sont suis es avec pour sur dans chez par sans qui que quoi où quand comment "
        "pourquoi merci oui non aussi encore demain aujourd'hui hier ce cette ces tout tous rien peux veux voudrais "
        "s'il plaît j'ai c'est d'un d'une qu'il à a"
    ),
    "es": _listed(
        "yo tú él ella nosotros vosotros ellos ellas mi mis tu tus su sus nuestro nuestra el la los las un una unos "
        "unas y o pero no es son soy estoy está están con para por sin sobre en del al que qué quién dónde cuándo "
        "cómo por qué gracias sí también mañana hoy ayer este esta estos estas todo nada puedes quiero quisiera "
        "necesito tengo hay favor lo le me a"
    ),
    "it": _listed(
        "io tu lui lei noi voi loro mio mia miei mie il lo la gli le un uno una e o ma non è sono sei con per su in "
        "di da del della che chi dove quando come perché grazie sì anche domani oggi ieri questo questa tutto niente "
        "puoi voglio vorrei ho mi a"
    ),
    "pt": _listed(
        "eu tu ele ela nós vós eles elas meu minha meus minhas o a os as um uma e ou mas não é são sou estou está com "
        "para por sem em no na do da que quem onde quando como obrigado obrigada sim também amanhã hoje ontem este "
        "esta isso tudo nada pode quero gostaria tenho a"
    ),
    "nl": _listed(
        "ik jij je hij zij wij jullie mij mijn jouw zijn haar ons onze de het een en of maar niet geen is ben bent "
        "was met voor op uit bij naar van te wat wie waar wanneer hoe waarom alsjeblieft dank ja nee ook nog morgen "
        "vandaag gisteren deze dit dat alles niets kun kan wil graag heb"
    ),
}
# Words of two lists count for English (the router's own language) when tied.
READABLE_LANGUAGES = frozenset({"en"})

_SCRIPTS: tuple[tuple[str, str], ...] = (
    ("cyrillic", "\u0400-\u04ff"),
    ("greek", "\u0370-\u03ff"),
    ("arabic", "\u0600-\u06ff\u0750-\u077f"),
    ("hebrew", "\u0590-\u05ff"),
    ("devanagari", "\u0900-\u097f"),
    ("thai", "\u0e00-\u0e7f"),
    ("hangul", "\uac00-\ud7af\u1100-\u11ff"),
    ("kana", "\u3040-\u30ff"),
    ("han", "\u3400-\u4dbf\u4e00-\u9fff"),
)
_SCRIPT_RES = tuple((name, re.compile(f"[{chars}]")) for name, chars in _SCRIPTS)
_LATIN_RE = re.compile(r"[a-zA-Z\u00c0-\u024f]")


@lru_cache(maxsize=8192)
def language_of(text: str) -> str:
    """``en``, another language of :data:`FUNCTION_WORDS`, a script name (``cyrillic``,
    ``kana``, ``han``, ...) for text mostly in another script, or ``und`` (Latin letters,
    no function word of any list: "Tisch reservieren", "7pm")."""
    latin = len(_LATIN_RE.findall(text))
    counts = {name: len(pattern.findall(text)) for name, pattern in _SCRIPT_RES}
    if counts["kana"]:  # Japanese mixes kana with Chinese characters
        counts["kana"] += counts.pop("han")
    script = max(counts, key=counts.__getitem__)
    if counts[script] > latin:
        return script
    words = terms(text)
    hits = {language: sum(word in listed for word in words) for language, listed in FUNCTION_WORDS.items()}
    best = max(hits, key=lambda language: (hits[language], language == "en"))
    return best if hits[best] else "und"


def readable(text: str) -> bool:
    """Whether the lexicon's English rules may read ``text``: English, or Latin-script text
    with no function word of any language and no letters outside ASCII ("7pm", "2 people")."""
    language = language_of(text)
    return language in READABLE_LANGUAGES or (language == "und" and text.isascii())


# -- English back-references and switch cues (routing); add a language by adding its patterns.
# "that email", "the restaurant", "this hotel": a noun phrase pointing back at earlier content.
DEICTIC_RE = re.compile(r"\b(?:that|this|those|these|the|same)\s+(\w+)")
# Back-references that name no domain: "the same day", "a cab there", "between the two"
# (not the "there" of "is there", "there will be").
ANAPHORA_RE = re.compile(
    r"\b(?:same|both|between|the two"
    r"|(?<!is )(?<!are )there(?!['’]s| (?:is|are|was|were|will|would|should|might|be|any)\b)"
    r"|that (?:area|day|date|time|place|location|price|night|trip|commute|city|town)"
    # "a hotel in the area", "anything nearby": the place the conversation was about.
    r"|(?:in|around|near) the (?:area|vicinity|neighbou?rhood)|nearby|close by|around there|those parts)\b",
    re.I,
)
# These may point past the thread just before: look at the two before.
PAIR_WORDS = frozenset({"both", "between", "the two", "same"})
# Words people use to start a new errand in the same chat ("I also need a taxi").
SWITCH_CUE_RE = re.compile(r"\b(?:also|too|as well|additionally)\b", re.I)


# -- The same in other languages: one pattern per language (keys as :func:`language_of` names them).
DEICTIC: dict[str, re.Pattern[str]] = {
    "en": DEICTIC_RE,
    "de": re.compile(r"\b(?:diese[nmrs]?|jene[nmrs]?|der|die|das|den|dem|dieselbe[nmr]?|gleiche[nmr]?)\s+(\w+)", re.I),
    "fr": re.compile(r"\b(?:ce|cet|cette|ces|le|la|les|l')\s*(\w+)", re.I),
    "es": re.compile(r"\b(?:ese|esa|esos|esas|este|esta|estos|estas|el|la|los|las|mismo|misma)\s+(\w+)", re.I),
    "it": re.compile(r"\b(?:quel|quella|quello|questo|questa|il|la|lo|l')\s*(\w+)", re.I),
    "pt": re.compile(r"\b(?:esse|essa|este|esta|aquele|aquela|o|a|os|as)\s+(\w+)", re.I),
    "cyrillic": re.compile(r"(?<!\w)(?:этот|эта|это|эти|этом|этой|тот|та|то|те|том|той)\s+(\w+)", re.I),
}
ANAPHORA: dict[str, re.Pattern[str]] = {
    "en": ANAPHORA_RE,
    "de": re.compile(r"\b(?:dasselbe|denselben|demselben|derselben|selbe[nmr]?|gleichen? (?:tag|zeit|ort|datum)|beide[nmrs]?|zwischen|dort|dorthin)\b", re.I),
    "fr": re.compile(r"(?:\b(?:même|mêmes|les deux|tous les deux|entre)\b|\blà(?:-bas)?\b|\by aller\b)", re.I),
    "es": re.compile(r"\b(?:mismo|misma|mismos|mismas|ambos|ambas|los dos|las dos|entre|allí|allá|ahí)\b", re.I),
    "it": re.compile(r"\b(?:stesso|stessa|stessi|entrambi|entrambe|tra i due|lì|là)\b", re.I),
    "pt": re.compile(r"\b(?:mesmo|mesma|ambos|ambas|os dois|as duas|entre|lá|ali)\b", re.I),
    "cyrillic": re.compile(r"(?<!\w)(?:тот же|та же|то же|те же|в тот же|оба|обе|между|туда|там)(?!\w)", re.I),
    "kana": re.compile(r"同じ|そこ|両方|二つの"),
}
PAIR_WORDS = PAIR_WORDS | frozenset(
    {"beide", "beiden", "beider", "zwischen", "les deux", "tous les deux", "entre", "ambos", "ambas", "los dos",
     "las dos", "entrambi", "entrambe", "tra i due", "os dois", "as duas", "оба", "обе", "между", "両方"}
)  # fmt: skip
SWITCH_CUES: dict[str, re.Pattern[str]] = {
    "en": SWITCH_CUE_RE,
    "de": re.compile(r"\b(?:auch|außerdem|zusätzlich|noch)\b", re.I),
    "fr": re.compile(r"\b(?:aussi|également|en plus|de plus)\b", re.I),
    "es": re.compile(r"\b(?:también|además)\b", re.I),
    "it": re.compile(r"\b(?:anche|inoltre)\b", re.I),
    "pt": re.compile(r"\b(?:também|além disso)\b", re.I),
    "cyrillic": re.compile(r"(?<!\w)(?:тоже|также|ещё|еще)(?!\w)", re.I),
}


# -- Openings of a correction of the reply just before ("no, I meant the work list"): what
# was meant must follow a "no", so a polite "no, thanks" / "Nein, danke" is no correction.
# What a polite English "no" goes on with: "no, it's enough thanks", "no, that's fine".
_DECLINED = r"(?:enough|fine|ok|okay|alright|all\s+(?:right|good|set)|good|great|perfect|plenty)"
_NO = r"\s*[,:;.!–—-]+\s*"  # "no" and then punctuation: "no, ...", "nein - ..."
CORRECTIONS: dict[str, re.Pattern[str]] = {
    "en": re.compile(
        rf"""^\s*(?:
            (?:no|nope|nah){_NO}(?!(?:(?:it|that)(?:'?s|\s+is)|i'?m)?\s*(?:just\s+)?{_DECLINED}\b)
                (?:i\s+(?:meant|mean|said|asked|wanted)\b|that'?s\s+not\b|not\b|wrong\b|it'?s\b|it\s+(?:is|was)\b|the\b|my\b)
          | (?:no|nope)\s+i\s+(?:meant|mean|said|asked|wanted)\b
          | i\s+(?:meant|said|asked\s+for)\b
          | not\s+(?:that|this|what\s+i\s+(?:meant|asked|said|wanted))\b
          | (?:that'?s|that\s+is|this\s+is)\s+(?:wrong|not\s+(?:right|it|what\s+i\s+(?:meant|asked|said|wanted)))\b
          | wrong\b\s*[,:;.!–—-]?
          | (?:incorrect|actually\s*,\s*i\s+meant)\b
        )""",
        re.IGNORECASE | re.VERBOSE,
    ),
    "de": re.compile(
        rf"^\s*(?:(?:nein|ne){_NO})?(?:ich\s+(?:meinte|meine|wollte|sagte)\b|nicht\s+(?:das|die|den|diese[nmrs]?)\b"
        r"|falsch\b|das\s+(?:ist|war)\s+(?:falsch|nicht\s+(?:richtig|das|was\s+ich))\b|das\s+meinte\s+ich\s+nicht\b)",
        re.I,
    ),
    "fr": re.compile(
        rf"^\s*(?:non{_NO})?(?:je\s+(?:voulais\s+dire|parlais\s+d|veux\s+dire)|pas\s+(?:ça|celle|celui|cette)\b"
        r"|c'est\s+faux\b|faux\b|ce\s+n'est\s+pas\s+(?:ça|ce\s+que|la\s+bonne|le\s+bon)\b)",
        re.I,
    ),
    "es": re.compile(
        rf"^\s*(?:no{_NO})?(?:(?:quise|quería)\s+decir\b|me\s+refería\b|eso\s+no\b|(?:esa|ese)\s+no\b"
        r"|(?:está|esta)\s+mal\b|incorrecto\b|no\s+es\s+(?:eso|lo\s+que)\b)",
        re.I,
    ),
    "it": re.compile(
        rf"^\s*(?:no{_NO})?(?:intendevo\b|volevo\s+dire\b|non\s+(?:quello|quella|questo|questa)\b|sbagliato\b"
        r"|è\s+sbagliat[oa]\b|non\s+è\s+(?:quello|giusto)\b)",
        re.I,
    ),
    "pt": re.compile(
        rf"^\s*(?:não{_NO})?(?:(?:eu\s+)?(?:quis|queria)\s+dizer\b|me\s+referia\b|isso\s+não\b|errado\b"
        r"|está\s+errad[oa]\b|não\s+é\s+(?:isso|o\s+que)\b)",
        re.I,
    ),
    "nl": re.compile(
        rf"^\s*(?:nee{_NO})?(?:ik\s+bedoelde\b|niet\s+(?:die|dat|deze)\b|fout\b|dat\s+is\s+(?:fout|niet\s+goed)\b)",
        re.I,
    ),
    "cyrillic": re.compile(
        rf"^\s*(?:нет{_NO})?(?:я\s+имел[аи]?\s+в\s+виду|я\s+имею\s+в\s+виду|не\s+(?:то|это|та|тот|ту)(?!\w)"
        r"|неправильно|неверно|это\s+не\s+то(?!\w))",
        re.I,
    ),
    # Written without spaces: "違う", "そうじゃなくて" ("not that, but"), "不对", "我是说" ("I meant").
    "kana": re.compile(r"^\s*(?:いや[、,]\s*)?(?:違う|違います|ちがう|そうじゃな|それじゃな)"),
    "han": re.compile(r"^\s*(?:不对|错了|不是这个|我是说|我的意思是)"),
}


def correction_opening(text: str) -> re.Match[str] | None:
    """The opening of a correction in the message's language, or None. Latin-script text
    is tried in each Latin-script language, its own first: short messages share function
    words ("No, intendevo la lista del lavoro" reads as Spanish), and each opening is a
    phrase of its own language only."""
    language = language_of(text)
    names: tuple[str, ...] = (language,)
    if language in FUNCTION_WORDS or language == "und":
        own = "en" if language == "und" else language
        names = (own, *(name for name in FUNCTION_WORDS if name != own))
    return next((found for name in names if name in CORRECTIONS and (found := CORRECTIONS[name].match(text))), None)


def _pattern(table: dict[str, re.Pattern[str]], text: str) -> re.Pattern[str] | None:
    language = language_of(text)
    return table.get("en" if language == "und" else language)


def back_reference(text: str) -> re.Match[str] | None:
    """A back-reference that names no domain ("the same day", "dort", "там") in the message's language."""
    pattern = _pattern(ANAPHORA, text)
    return pattern.search(text) if pattern else None


def deictic_nouns(text: str) -> list[str]:
    """The words after a demonstrative ("that email", "diese E-Mail") in the message's language."""
    pattern = _pattern(DEICTIC, text)
    return [match.group(1) for match in pattern.finditer(text.lower())] if pattern else []


# -- one more of the same, opening the message: "also call the bank", "and also buy a card",
# "und außerdem die Steuer", "Außerdem den Zahnarzt anrufen", "et aussi appeler le plombier",
# "y también comprar pilas". Said first, the cue adds to what the conversation is doing; said
# later ("I also need a taxi") it announces a new errand (:func:`switch_cue`).
ADDITION_OPENINGS: dict[str, re.Pattern[str]] = {
    "en": re.compile(r"^\s*(?:(?:and|oh|ok|okay|plus)[,!]?\s+)?(?:also|as\s+well|additionally)\b", re.I),
    "de": re.compile(r"^\s*(?:und\s+)?(?:außerdem|ausserdem|zusätzlich|auch\s+noch|noch)\b", re.I),
    "fr": re.compile(r"^\s*(?:et\s+)?(?:aussi|également|en\s+plus|de\s+plus)\b", re.I),
    "es": re.compile(r"^\s*(?:y\s+)?(?:también|además)\b", re.I),
    # A bare "and", "und", "et", "y" opening two words or more ("and the cake", "und den Müll
    # rausbringen"): one more of the same too, unless it thanks, takes leave or asks.
    "and": re.compile(
        r"^\s*(?:oh[,!]?\s+)?(?:and|und|et|y)[,]?\s+(?!(?:thanks?|bye|cheers|ok|okay|danke|tschüss|merci|gracias|adiós|adios"
        r"|what|how|when|where|why|who|was|wie|wann|wo|warum|que|quoi|comment|quand|où|qué|cómo|cuándo|dónde|you|du|tu|vous|sie|usted)\b)(?=\S+\s+\S)",
        re.I,
    ),
}


def opens_addition(text: str) -> bool:
    """Whether the message opens with "also", "und außerdem", "et aussi", "y también": one
    more of what the conversation is doing (a question is no addition)."""
    stripped = text.strip()
    return not stripped.endswith(("?", "？")) and any(pattern.match(stripped) for pattern in ADDITION_OPENINGS.values())


# A request that adds something to keep, opening the message: "add ...", "put ... on my list",
# "note ...", "Setz ...", "Füg ... hinzu", "Ajoute ...", "Añade ...", "Apunta ...".
_ADDS = re.compile(
    r"^\s*(?:(?:please|pls|bitte|por\s+favor|and|und|et|y)[,\s]+)*(?:(?:can|could)\s+you\s+|kannst\s+du\s+|(?:können|könnten)\s+sie\s+|merci\s+d(?:e\s+|['’]\s?))?"
    r"(?:add|put|stick|jot|note|new\s+task|remind|(?:need|have|got)\s+to|gotta|must|füg\w*|setz\w*|trag\w*|notier\w*|schreib\w*|erinner\w*|"
    r"ajout\w*|mets|mettre|not(?:e|er)\b|rappelle|añad\w*|agrega|pon|apunta|anota|recuérdame|recuerdame)\b",
    re.I,
)


# German's verb of keeping comes last: "Kannst du 'Fenster putzen' auf meine Liste setzen?", "... notieren".
_ADDS_LAST = re.compile(
    r"\b(?:(?:auf|in|zu)\s+(?:meine[rn]?|die|der)\s+\w*(?:liste|aufgaben)\s+(?:setzen|schreiben|packen|tun|nehmen|aufnehmen|eintragen)"
    r"|hinzufügen|hinzuzufügen|aufschreiben|notieren|eintragen)\s*[?.!]*\s*$",
    re.I,
)


def adds_something(text: str) -> bool:
    """Whether ``text`` asked for something to be kept ("add ...", "Setz ...", "Ajoute ...",
    "... auf meine Liste setzen?") or said a duty ("I have to ..."), or was itself one more of
    the same: what an "also" adds to."""
    return bool(text.strip()) and (bool(_ADDS.match(text)) or bool(_ADDS_LAST.search(text)) or states_duty(text) or opens_addition(text))


def without_addition(text: str) -> str:
    """``text`` without the "also", "und außerdem", "et aussi", "y también" opening it (and a comma after)."""
    stripped = text.strip()
    for pattern in ADDITION_OPENINGS.values():
        found = pattern.match(stripped)
        if found and stripped[found.end() :].strip(" ,:"):
            return stripped[found.end() :].strip(" ,:")
    return text


# -- a polite request's opening, in English, German, French and Spanish ------------------------
# "please ...", "Bitte füg ...", "Können Sie ... hinzufügen?", "Merci d'ajouter ...", "Por favor,
# añade ...": the verb after it decides what is asked; a formal "Können Sie ...?" is a request,
# not a question.
_ASKING = r"(?:können|könnten|würden)\s+sie|(?:kannst|könntest|würdest)\s+du|(?:pourriez|pouvez)-vous|(?:peux|pourrais)-tu|¿?\s*(?:puedes|podrías|podrias|puede|podría|podria)"
_POLITE_OPENING = re.compile(
    r"^\s*(?:(?:please|pls|kindly)[,\s]+|(?:can|could|would)\s+you\s+|bitte[,\s]+|merci\s+d(?:e\s+|['’]\s?)"
    r"|s['’]il\s+(?:te|vous)\s+pla[iî]t[,\s]+|por\s+favor[,\s]+|(?:" + _ASKING + r")[,\s]+)+",
    re.I,
)
_FORMAL_ASKING = re.compile(rf"(?:{_ASKING})[,\s]", re.I)


def without_politeness(text: str) -> str:
    """``text`` without the polite opening of a request ("Bitte", "Können Sie", "merci de",
    "por favor"), and without the question mark a German, French or Spanish "could you" ends
    with; ``text`` itself when it opens with none, or is nothing else."""
    found = _POLITE_OPENING.match(text)
    rest = text[found.end() :].strip() if found else ""
    if not found or not rest:
        return text
    if _FORMAL_ASKING.search(text[: found.end()]):
        rest = rest.rstrip(" ?？")
    return rest


def switch_cue(text: str) -> bool:
    """Whether the message announces a new errand ("I also need", "auch", "тоже")."""
    pattern = _pattern(SWITCH_CUES, text)
    return bool(pattern and pattern.search(text))

# -- First-person words: a message in another language that has one may state a fact about
# the person ("Ich bin Vegetarier", "Soy vegetariano", "Я вегетарианец"); the fact
# pre-filter lets it through to the model extractor instead of rejecting it unread.
FIRST_PERSON: dict[str, frozenset[str]] = {
    # Subjects and possessives, not objects: "remind me" ("erinnere mich") is a request.
    "de": _listed("ich mein meine meinen meinem meiner wir unser unsere"),
    "fr": _listed("je j' mon ma mes nous notre nos m'appelle suis j'ai"),
    "es": _listed("yo soy estoy mi mis tengo vivo trabajo nosotros nuestro nuestra llamo"),
    "it": _listed("io sono mio mia miei ho vivo lavoro chiamo"),
    "pt": _listed("eu sou estou meu minha meus tenho moro trabalho chamo"),
    "nl": _listed("ik mijn wij onze ben woon werk heet"),
    "cyrillic": _listed("я мой моя моё мои мы наш наша"),
    "greek": _listed("εγώ είμαι μου μένω δουλεύω"),
    "devanagari": _listed("मैं मेरा मेरी मेरे हम हमारा हमारी"),
    "arabic": _listed("أنا انا اسمي لدي عندي نحن أعمل أسكن"),
    "hebrew": _listed("אני שלי שמי אנחנו"),
    "hangul": _listed("나 저 제 내 나는 저는 제가 내가"),
    # Written without spaces: looked for as parts of the text.
    "kana": _listed("私 僕 俺 わたし ぼく 自分"),
    "han": _listed("我 我的 我们"),
}


def first_person(text: str) -> bool:
    """Whether a message not in English uses a first-person word of its language (or of any
    listed language when it is in none of them)."""
    language = language_of(text)
    if language in ("kana", "han"):
        return any(marker in text for marker in FIRST_PERSON["kana"] | FIRST_PERSON["han"])
    words = set(terms(text))
    words |= {word.split("'")[0] + "'" for word in words if "'" in word}  # j'ai → j'
    lists = [FIRST_PERSON[language]] if language in FIRST_PERSON else FIRST_PERSON.values()
    return any(words & listed for listed in lists)


# -- what a pasted email looks like, in English, German, French and Spanish -------------------
# Header fields as mail programs write them ("De : Sophie", "Betreff: Termin"); a message is
# an email when two of them come close together, whether on lines of their own or run
# together on one line (a paste that lost its line breaks), or when it starts with one.
_FIELDS = r"from|to|cc|subject|date|sent|reply-to|von|an|betreff|datum|gesendet|de|à|objet|envoyé|para|asunto|fecha|enviado"
_HEADER_FIELD = re.compile(rf"(?:^|(?<=[\s>]))(?:{_FIELDS})\s?:(?=\s)", re.I | re.M)
_FIRST_FIELD = re.compile(r"^\s*(?:from|subject|von|betreff|de|objet|asunto)\s?:\s*\S", re.I)
_FIELD_LINE = re.compile(rf"^\s*(?:{_FIELDS})\s?:", re.I)


def is_header_line(line: str) -> bool:
    """Whether ``line`` is one of an email's header fields ("From: ...", "Betreff: ...")."""
    return bool(_FIELD_LINE.match(line))

# A forwarded email's subject marker, or a mail program's forward line.
_FORWARD = re.compile(
    r"^\s*(?:fwd?|wg|tr|rv)\s?:\s*\S|"
    r"(?:forwarded message|original message|weitergeleitete nachricht|ursprüngliche nachricht|"
    r"message transféré|message d'origine|mensaje reenviado|mensaje original)",
    re.I,
)
_GREETING = (
    r"(?i:hi|hello|hey|dear|good morning|good afternoon|hallo|liebe[rs]?|sehr geehrte[rs]?|guten tag|moin|"
    r"bonjour|bonsoir|salut|cher|chère|hola|estimad[oa]s?|querid[oa]s?|buenos días)"
)
_CLOSING = (
    r"(?i:many thanks|thanks|thank you|kind regards|best regards|best wishes|regards|best|cheers|sincerely|yours|"
    r"viele grüße|liebe grüße|beste grüße|mit freundlichen grüßen|grüße|gruß|lg|vielen dank|danke|"
    r"cordialement|bien à vous|amicalement|bises|merci|bonne journée|"
    r"un saludo|saludos|atentamente|un abrazo|muchas gracias|gracias)"
)
_NAME = r"[A-ZÀ-ÖØ-Þ][\w.'-]*(?: [A-ZÀ-ÖØ-Þ][\w.'-]*)?"  # capitalised: "Mark", "Reed Clinic"
# "Hallo Jonas," / "Dear team,": a greeting to someone (the hub is nobody's Jonas).
_ADDRESSED = re.compile(rf"^\s*{_GREETING}\s+(?:{_NAME}|(?i:team|all|everyone|customer|patient|sir|madam))\s*[,!]")
# "Thanks, Mark" / "Viele Grüße, Petra" at the end: a letter signed by someone.
_SIGNED = re.compile(rf"(?<!\w){_CLOSING}[,!.]?\s+{_NAME}\.?\s*$")
_CLOSED = re.compile(rf"(?<!\w){_CLOSING}[,!.]?\s*$")
_LETTER_WORDS = 8  # a letter has a body: "hi, thanks" and "thanks, Mark" alone are no email


# An email the person introduces in their own words before pasting it: "this is the email
# from my landlord: ...", "got this from the school: ...", "Email from my boss: ...", "Sam
# wrote: ...", "here's what the garage sent me - ...", "Mail von der Hausverwaltung: ...",
# "Mail de l'école : ...", "Correo del banco: ...". What follows is someone else's words.
_INTRODUCED = re.compile(
    r"^\s*(?:(?:so|ok|okay|hi|hey|and)[,!]?\s+)?(?:"
    r"(?:this|here)(?:['’]s|\s+is)\s+(?:an?\s+|the\s+)?(?:e-?mail|mail|message|letter|text)\b[^:\n]{0,40}?"
    r"|(?:i\s+)?(?:just\s+)?got\s+(?:this|an?\s+(?:e-?mail|mail|message|letter))\b[^:\n]{0,40}?"
    r"|(?:an?\s+|the\s+)?(?:e-?mail|mail|message|letter)\s+from\s+[^:\n]{1,40}?"
    r"|here(?:['’]s|\s+is)\s+what\s+[^:\n]{1,40}?\s+(?:sent|wrote|emailed)(?:\s+me)?"
    r"|(?-i:[A-ZÀ-Þ][\w.'’-]*)(?:\s+(?-i:[A-ZÀ-Þ][\w.'’-]*))?\s+(?:wrote|writes|sent\s+me|emailed(?:\s+me)?|schreibt|schrieb|a\s+écrit|écrit|escribió|escribe)"
    r"|(?:e-?mail|mail|nachricht|brief)\s+(?:von|vom)\s+[^:\n]{1,40}?"
    r"|(?:e-?mail|mail|message|courriel|lettre)\s+(?:de|du|des)\s+[^:\n]{1,40}?"
    r"|(?:correo|e-?mail|mensaje|carta)\s+(?:de|del)\s+[^:\n]{1,40}?"
    r")\s*[:–—-]\s+",
    re.I,
)
_INTRODUCED_WORDS = 4  # words after the introduction, at least: "Mail de l'école : la sortie est annulée."


def looks_like_email(text: str) -> bool:
    """Whether ``text`` has the shape of an email: header fields (two, or one opening the
    message; in English, German, French and Spanish), a forward marker, or a letter's body
    signed by someone ("... Viele Grüße, Petra") or addressed to someone and closed
    ("Dear team, ... Best regards"). A merely polite request ("hi, please add milk,
    thanks") names no one, so it is no letter."""
    if len(_HEADER_FIELD.findall(text)) >= 2 or _FIRST_FIELD.match(text) or _FORWARD.search(text):
        return True
    stripped = text.strip()
    introduced = _INTRODUCED.match(stripped)
    if introduced and len(stripped[introduced.end() :].split()) >= _INTRODUCED_WORDS:
        return True
    if len(stripped.split()) < _LETTER_WORDS:
        return False
    return bool(_SIGNED.search(stripped) or (_ADDRESSED.match(stripped) and _CLOSED.search(stripped)))


# -- a question about the bot itself, in English, German, French and Spanish ---------------------
_ABOUT_THE_BOT = re.compile(
    r"\b(?:who are you|what can you do|what do you do|how are you|what are you|help me with|how does this work|"
    r"wer bist du|was kannst du|qui es-tu|qu'est-ce que tu sais|quién eres|qué puedes|"
    # How the bot is, asked in the four languages: small talk, whatever agent held the conversation.
    r"how(?:'s|’s| is) it going|how are things|wie geht(?:'s|’s|s| es)(?: dir| ihnen| euch)?|wie läuft(?:'s|’s| es)|"
    r"comment (?:ça|ca) va|comment vas-tu|comment allez-vous|ça va\s*\?|(?:qué|que) tal(?:\s+(?:estás|estas|está|todo|va))?\s*[?!.]*$|c[óo]mo (?:estás|estas|está usted|te va|va todo))(?!\w)",
    re.I,
)


# -- a duty said in the first person, in English, German, French and Spanish --------------------
# "I have to call the plumber", "Ich muss noch die Steuer machen", "Il faut que je signe ...",
# "Tengo que llevar el coche al taller": something still to be done, said as one's own duty.
# Opening the message (after "and", "also", "oh"); "what do I have to do?" asks, it is no duty.
# An adverb that adds ("außerdem", "además", "de plus", "besides") may open it too, and German puts
# the verb before "ich" after any opening word ("Außerdem muss ich ...", "Morgen sollte ich ...").
_DUTY = re.compile(
    r"^\s*(?:(?:and|also|oh|ok|so|plus|besides|und|außerdem|ausserdem|zudem|dann|et|aussi|alors|en\s+plus|de\s+plus|y|también|además|pues)[,!]?\s+)*"
    r"(?:i\s+(?:still\s+|really\s+|also\s+)?(?:need|have|ought|got)\s+to|i\s+must|i(?:'|’)ve\s+got\s+to|i\s+gotta|i\s+should|"
    # with no subject, as people type: "gotta call Rick", "need to renew the passport", "still have to pay the rent"
    r"gotta|(?:still\s+|really\s+)?(?:need|have|got)\s+to(?!\s+(?:know|see|ask|check)\b)|must|"
    r"ich\s+(?:muss|müsste|sollte|soll)|wir\s+müssen|je\s+dois|il\s+(?:faut|faudrait)\s+(?:aussi\s+|encore\s+)?que\s+je|il\s+me\s+faut|"
    r"tengo\s+que|debo|necesito|hay\s+que)\b"
    r"|^\s*(?!(?:was|wann|wo|wie|warum|wieso|welche\w*|wer|wen|wem)\b)[^\W\d_]+,?\s+(?:muss|müsste|sollte|soll)\s+ich\b"
    # A thing that wants doing, said of the thing ("the toner needs ordering", "the boiler needs to
    # be serviced", "the car has to go in for its MOT", "die Steuer muss noch gemacht werden"): a duty too.
    r"|^\s*(?:(?:and|also|oh|so|plus)[,!]?\s+)?(?:the|my|our|this|that)\s+(?:[\w'’-]+\s+){0,3}?(?:needs|need|wants)\s+(?:[a-z]+ing\b|to\s+be\s+[a-z]+)"
    r"|^\s*(?:the|my|our|this|that)\s+(?:[\w'’-]+\s+){0,3}?(?:has|have|must)\s+(?:to\s+)?be\s+[a-z]+(?:ed|en|t)\b"
    r"|^\s*(?:der|die|das|mein|meine|unser|unsere)\s+(?:[\w'’-]+\s+){0,3}?muss\s+(?:noch\s+|dringend\s+|bis\s+\S+\s+)*(?:[\w'’-]+\s+){0,3}?(?:ge\w+(?:t|en)|\w+ge\w+(?:t|en))\s+werden\b",
    re.I,
)


def states_duty(text: str) -> bool:
    """Whether ``text`` opens with a duty of the speaker's ("I have to ...", "ich muss",
    "il faut que je", "tengo que"), as a statement, not a question."""
    stripped = text.strip()
    return bool(_DUTY.match(stripped)) and not stripped.endswith(("?", "？"))


# -- something of one's own said to be done, in English, German, French and Spanish ------------
# "I've booked the dentist", "the insurance is renewed", "Zahnarzt ist erledigt", "Hab den
# Klempner angerufen", "C'est fait pour le dentiste", "Ya llamé al fontanero".
_IRREGULAR_DONE = (
    r"did|got|bought|paid|sent|made|took|went|wrote|found|brought|gave|sold|met|rang|drove|swept|hung|"
    r"built|caught|fed|read|put|set|cut|left|ran|spoke|told|threw|won|ate|drank|sorted|done"
)
# With no subject ("booked the MOT", "sent it", "paid it"), a past form opens the message; one
# followed by another past form is a name doing something ("Mohammed called", "Fred paid"),
# and forms that are also requests or states ("put", "set", "read", "tired", "interested") are none.
# Past forms of wanting, trying and failing say nothing was done ("Wanted to ask about the
# invoice", "Tried calling the plumber", "I missed the bus").
_NOT_DONE_ED = (
    r"need|feed|seed|bleed|breed|speed|proceed|succeed|exceed|shed|wed|red|bed|tired|bored|interested|excited|worried|married|based|used|supposed|scared"
    r"|wanted|wished|hoped|tried|started|needed|decided|intended|missed|failed|moved|retired|graduated|born"
)
_PAST_ONLY = r"did|got|bought|paid|sent|made|took|went|wrote|found|brought|gave|sold|met|rang|drove|caught|spoke|told|won"
_PAST = rf"(?:(?!(?:{_NOT_DONE_ED})\b)[a-z]+ed|{_PAST_ONLY})"
_DONE = re.compile(
    r"^\s*(?:(?:ok|okay|so|and|also|oh|right|yes|ja|oui|sí|si)[,!]?\s+)*i(?:['’]ve|\s+have)?\s+(?:just\s+|already\s+|finally\s+|now\s+)?"
    rf"(?:(?!(?:{_NOT_DONE_ED})\b)[a-z]+ed|{_IRREGULAR_DONE})\b"
    rf"|^\s*(?:(?:ok|okay|so|right|yes)[,!]?\s+)?(?:just\s+|already\s+|finally\s+)?{_PAST}\b(?!\s+{_PAST}\b)(?=\s+\S|\s*[.!]*$)"
    r"|\b(?:is|are|'s|’s)\s+(?:now\s+|all\s+|already\s+)?(?:done|finished|sorted|completed|taken care of|dealt with|paid|booked|fixed|renewed|handled|over)\b"
    r"|\b(?:done|finished)\s+with\b|\b(?:all\s+)?(?:done|sorted|finished)\s*[.!]*$"
    # "the toner's been ordered", "the forms have been sent", "library books are back", "the parcel's
    # picked up": a state reached, said of the thing
    r"|\b(?:has|have|'s|’s)\s+(?:now\s+|already\s+|finally\s+|just\s+)?been\s+(?:(?!(?:told|asked|invited|waiting|trying|thinking|looking)\b)[a-z]+(?:ed|en|t)|paid|sent|done|sorted|made|bought|taken|given|sold|found|brought)\b"
    r"|\b(?:is|are|'s|’s)\s+(?:now\s+|all\s+|already\s+|finally\s+)?(?:back|returned|collected|picked\s+up|sent\s+off|handed\s+in|posted|ordered|cancelled|canceled)\s*[.!]*$"
    r"|\b(?:erledigt|geschafft|fertig|abgehakt)\b|^\s*(?:ich\s+)?(?:hab|habe|hab['’])\s+.*\b\w*ge\w+(?:t|en)\s*[.!]*$"
    r"|\bc['’]est\s+(?:fait|bon|réglé|fini)\b|\b(?:fini|terminé|réglé)\b|^\s*j['’]ai\s+(?:déjà\s+|enfin\s+)?\w+(?:é|i|u|is|it)\b"
    r"|(?:^|(?<=\s))ya\s+(?:está|esta|lo\s+\w+(?:é|í)|\w+(?:é|í))(?!\w)|\b(?:hecho|listo|terminad[oa]|resuelto)\b"
    # A state that says it is done: "Müll ist draußen", "die Miete ist überwiesen", "le loyer est payé",
    # "el recibo está pagado" (not "ist geplant für Montag": a plan for a day)
    r"|\b(?:ist|sind)\s+(?:jetzt\s+|schon\s+|nun\s+|endlich\s+)?(?:ge[a-zäöüß]+(?:t|en)|weg|raus|draußen|überwiesen|abgeschickt|verschickt|bestellt|bezahlt)\b(?!\s+(?:für|am|um|bis|ab|seit)\b)"
    r"|\b(?:est|sont)\s+(?:déjà\s+|enfin\s+)?(?:payée?s?|réglée?s?|envoyée?s?|réservée?s?|faite?s?|terminée?s?|rendue?s?)\b"
    r"|\b(?:está|están)\s+(?:ya\s+)?(?:pagad[oa]s?|hech[oa]s?|reservad[oa]s?|enviad[oa]s?|terminad[oa]s?|devuelt[oa]s?)\b",
    re.I,
)


# -- a request to pass something on to a team, in English, German, French and Spanish ---------
# "pass it on to accounting", "let the sales team know", "Leite das an die Buchhaltung
# weiter", "Sag der Buchhaltung Bescheid", "Transmets ça à l'équipe RH", "Pásaselo al equipo
# de contabilidad", "Avisa a soporte": the verbs of passing on and the one they go to, whatever
# was said before (a pasted email, a note) and whatever the team is called.
# Spanish verbs that carry what they pass on ("pásaselo", "reenvíalo", "mándaselo") and
# those that tell someone ("avisa a soporte"): the team reader (hub.models.extract) uses them too.
PASS_ON_ES = r"p[aá]s[aá]selo|p[aá]salo|reenv[ií]a(?:selo|lo)|m[aá]nd(?:a|ale)selo|env[ií]aselo"
TELL_ES = r"avisa|informa|dile|d[ií]selo|com[uú]nica(?:le|selo)?"
_PASS_ON = re.compile(
    r"\b(?:pass|forward|send|hand|give)\s+(?:it|this|that|these|them|this\s+one)\s+(?:on\s+|over\s+|along\s+)?to\b(?!\s+(?:me|us|myself)\b)"
    r"|\b(?:pass|hand)\s+(?:it\s+|this\s+|that\s+)?(?:on|over|along)\s+to\b(?!\s+(?:me|us|myself)\b)|^\s*dispatch\b"
    r"|\blet\s+(?!(?:me|us|it|him|her|them)\b)(?!(?-i:[A-ZÀ-Þ])[\w-]+\s+know\b)(?:the\s+)?[\w-]+(?:\s+team)?\s+know\b|\blet\s+(?:the\s+)?[\w-]+\s+team\s+know\b"
    r"|\b(?:tell|notify|ping|inform|ask|warn|send|message|email)\s+(?:the\s+)?[\w-]+\s+team\b"
    r"|\b(?:leite|leit|schick|schicke|reich|reiche|gib|gebe)\s+(?:das|es|dies|sie|ihn|ihm|ihr)\s+(?:bitte\s+)?(?:weiter\s+)?an\s+(?:die|den|das|dem)\b"
    r"|\bweiterleiten\b|\b(?:sag|sage|gib)\s+(?:bitte\s+)?(?:dem|der|den)\s+[\w-]+(?:\s+[\w-]+)?\s+bescheid\b|\b(?:sag|sage)\s+(?:bitte\s+)?(?:dem|der)\s+[\w-]*team\b"
    r"|\b(?:transmets|transmettez|transférer|transfère|fais\s+suivre|faites\s+suivre|passe|envoie)\s+(?:ça|ca|cela|le|la|les|l['’]\s?\w+)\s+(?:à|a|au|aux)\b"
    r"|\b(?:préviens|prévenez|informe|informez|dis|dites)\s+(?:à\s+)?l['’]\s?équipe\b"
    rf"|\b(?:{PASS_ON_ES})\b"
    rf"|^\s*(?:{TELL_ES})\s+(?:a|al)\s+(?!m[ií]\b)(?!(?-i:[A-ZÁÉÍÓÚÑ])[\w'’.-]*\s+que\b)",
    re.I,
)


def passes_on(text: str) -> bool:
    """Whether ``text`` asks to pass something on to a team or someone ("pass it on to
    accounting", "Sag der Buchhaltung Bescheid", "Transmets ça à l'équipe RH", "Avisa a soporte")."""
    return bool(_PASS_ON.search(text))


# -- what is still to do asked for, in English, German, French and Spanish ---------------------
# "what's on my list?", "what's left?", "anything left to do?", "Was steht noch an?", "Was ist
# noch offen?", "Qu'est-ce qui me reste à faire ?", "¿Qué me queda por hacer?": a question about
# one's own list, whatever agent the conversation was with (a note just saved, a reminder).
_LEFT = re.compile(
    r"^\s*(?:(?:and|so|ok|okay|right)[,\s]+)?(?:"
    r"what(?:['’]s|s|\s+is)\s+(?:still\s+|else\s+)?(?:left|open|outstanding|on\s+my\s+(?:[\w-]+\s+)?(?:list|plate))"
    r"|what\s+(?:do|have)\s+i\s+(?:still\s+)?(?:got\s+|have\s+)?(?:left\s+)?(?:to\s+do|on\s+my\s+(?:list|plate))"
    r"|(?:is\s+there\s+)?anything\s+(?:still\s+|else\s+)*(?:left|open|on\s+my\s+(?:list|plate)|to\s+do\b|(?:that\s+)?i\s+(?:still\s+)?(?:need|have|got)\s+to\s+do\b)"
    # "what else do I need to do", "what do I still need to do", "what have I got on": one's own list
    r"|what\s+(?:else\s+)?(?:do|have)\s+i\s+(?:still\s+)?(?:got\s+|need\s+|have\s+)?(?:left\s+)?(?:to\s+do|on\b)"
    # "what's on today?", "what do I have tomorrow?", "what's pending?", "what's still to do?", "show me my to-dos"
    r"|what(?:['’]s|s|\s+is)\s+(?:on\s+(?:for\s+)?(?:today|tomorrow|this\s+week|the\s+agenda)|(?:still\s+)?(?:pending|due|to\s+do)(?:\s+(?:today|tomorrow|this\s+week))?\s*[?!.]*$|planned\s+for\s+(?:today|tomorrow))"
    r"|what\s+do\s+i\s+have\s+(?:on\s+|planned\s+|to\s+do\s+)?(?:today|tomorrow|this\s+week)"
    r"|(?:show|give|tell)\s+me\s+(?:all\s+)?my\s+(?:to-?dos?|tasks|to-?do\s+list)|any\s+tasks\s+(?:left|open|due)"
    r"|was\s+(?:liegt|gibt(?:['’]s|\s+es))\s+(?:heute\s+|noch\s+|morgen\s+)*(?:an\b|zu\s+tun)"
    r"|j['’]ai\s+quoi\s+à\s+faire|qu['’]est-ce\s+que\s+j['’]ai\s+(?:de\s+prévu|à\s+faire)"
    r"|¿?\s*qu[ée]\s+hay\s+(?:pendiente|para\s+hoy|que\s+hacer)"
    r"|was\s+(?:steht|ist|hab\w*\s+ich)\s+(?:bei\s+mir\s+)?(?:noch\s+)?(?:alles\s+)?(?:an\b|offen|auf\s+meiner\s+\w*liste|zu\s+tun)"
    r"|was\s+(?:muss|sollte|soll)\s+ich\s+(?:heute\s+|noch\s+|alles\s+)*(?:tun|machen|erledigen)\b"
    r"|qu['’]est-ce\s+qu(?:i\s+(?:me\s+)?reste|['’]il\s+(?:me\s+)?reste|e\s+j['’]ai\s+(?:encore\s+)?à\s+faire|e\s+je\s+dois\s+(?:encore\s+)?faire)|que\s+me\s+reste-t-il"
    r"|¿?\s*qu[ée]\s+(?:me\s+)?(?:queda|falta|tengo\s+(?:que\s+hacer|pendiente))"
    r")",
    re.I,
)


def asks_whats_left(text: str) -> bool:
    """Whether ``text`` asks what is still on one's list ("what's left?", "Was ist noch offen?",
    "Qu'est-ce qui me reste à faire ?", "¿Qué me queda por hacer?")."""
    return bool(_LEFT.match(text.strip()))


# -- a reply to someone's email asked for, in English, German, French and Spanish -------------
# "write back to Dale Motors saying ...", "write Sam back saying ...", "reply to the bank that
# ...", "Antworte Anna, dass ...", "Schreib Petra zurück", "Réponds à l'agence que ...",
# "Responde a la gestoría que ...": the verb of answering opens the request, whoever it is
# to and whatever the conversation was doing (a task list, a note).
_REPLY = re.compile(
    r"^\s*(?:(?:please|and|also|ok|so|can\s+you|could\s+you|bitte|und|et|y|por\s+favor|merci\s+de)[,\s]+)*(?:"
    r"(?:write|send)\s+back\s+to\b(?!\s+(?:me|us)\b)|(?:write|send)\s+(?!(?:it|that|this|them)\b)[\w'’.-]+(?:\s+[\w'’.-]+){0,2}?\s+back\b"
    r"|(?:write|send|draft)\s+(?:[\w'’.-]+\s+)?(?:a|an)\s+(?:reply|answer)\b|(?:reply|respond|answer)\s+(?:to\s+)?(?!(?:me|it)\b)\S"
    r"|antworte\w*|schreib\w*\s+(?:[\w'’.-]+\s+){1,3}?zurück\b|schreib\w*\s+(?:[\w'’.-]+\s+)?eine\s+antwort\b"
    r"|r[ée]pon(?:ds|dez|dre)\s+(?:à|a|au|aux)\b|[ée]cri(?:s|vez)\s+(?:à|au|aux)\s+.+\s+que\b"
    # A person told something, by name: "tell Sam I can't come on Friday", "let Priya know I'll call
    # her", "Sag Petra, dass ...", "Dis à Marc que ...", "Dis-leur que ...", "Dile a Sam que ..."
    r"|(?:tell|let)\s+(?-i:[A-ZÀ-Þ][\w'’.-]*)(?:\s+(?-i:[A-ZÀ-Þ][\w'’.-]*))?(?!\s+team\b)\s+(?:know\b|that\b|i\b|i['’]|we\b|it['’]?s?\b|the\b|they\b|my\b)"
    r"|sag\w*\s+(?-i:[A-ZÄÖÜ][\w'’.-]*)[,\s]+(?:dass|ich|wir|es)\b|dis\s+(?:à|a)\s+(?-i:[A-ZÀ-Þ][\w'’.-]*)\s+qu|dis-(?:lui|leur)\s+qu"
    r"|d[ií]le(?:s)?\s+(?:a\s+(?-i:[A-ZÁÉÍÓÚÑ][\w'’.-]*)\s+)?que\b"
    r"|respond[ea]\s+(?:a|al)\b|contesta\w*\s+(?:a|al)\b|resp[oó]nde(?:le|les)\b"
    # the one answered said by a pronoun fused to the verb: "Contéstales que ...", "Escríbele que ...",
    # "Réponds-leur que ...", "Réponds-lui"
    r"|cont[ée]sta(?:le|les)(?:lo|la)?\b|escr[íi]be(?:le|les)\s+que\b|r[ée]pond(?:s|ez)-(?:lui|leur)\b"
    r")",
    re.I,
)


def asks_reply(text: str) -> bool:
    """Whether ``text`` asks for a reply to someone ("write back to Dale Motors saying ...",
    "write Sam back saying ...", "Antworte Anna, dass ...", "Réponds à l'agence que ...")."""
    return bool(_REPLY.match(text.strip()))


# -- something moved to another day, in English, German, French and Spanish -------------------
# "push the plumber to friday", "move the gutter call to monday", "verschieb den Zahnarzt auf
# Montag", "Tierarzt auf Freitag verlegen", "Décale le garagiste à lundi", "mets les livres à
# samedi", "Pasa lo del fontanero al lunes": a verb of moving that opens the request, then a
# day. The verb may be one no example says; the day and the verb's place tell it.
_DAY = (
    r"(?:mon|tues|wednes|thurs|fri|satur|sun)day|tomorrow|tonight|next\s+week|the\s+\d{1,2}(?:st|nd|rd|th)?"
    r"|montag|dienstag|mittwoch|donnerstag|freitag|samstag|sonntag|morgen|übermorgen|nächste\s+woche"
    r"|lundi|mardi|mercredi|jeudi|vendredi|samedi|dimanche|demain|la\s+semaine\s+prochaine"
    r"|lunes|martes|miércoles|miercoles|jueves|viernes|sábado|sabado|domingo|mañana|la\s+semana\s+que\s+viene"
    r"|\d{1,2}(?:[./]\d{1,2})?\.?"
)
_MOVE_VERB = (
    r"move|push|bump|shift|reschedule|postpone|delay|put\s+off|change|switch"
    r"|verschieb\w*|verleg\w*|schieb\w*|leg|setz|änder\w*"
    r"|décale\w*|decale\w*|repousse\w*|reporte\w*|déplace\w*|deplace\w*|mets|mettez|passe|change"
    r"|pasa|cambia|mueve|aplaza|pospón|pospon\w*|retrasa|adelanta|pon"
)
_MOVED = re.compile(
    rf"^\s*(?:(?:please|bitte|and|also|und|et|y|can\s+you|could\s+you|kannst\s+du|peux-tu)[,\s]+)*(?:{_MOVE_VERB})\b"
    # "move it to saturday": a bare pointer names no item; the conversation's own is meant.
    rf"(?!\s+(?:it|that|this|es|das|ça|ca|le|la|lo)\s+(?:to|auf|à|a|al)\b)(?:\s+[^\s]+){{1,6}}?\s+(?:to|till|until|auf|à|a|au|al|para\s+el|el)\s+(?:(?:next|this|le|el|den|dem)\s+)?(?:{_DAY})\b"
    rf"|^\s*(?:[^\s]+\s+){{1,4}}?auf\s+(?:{_DAY})\s+(?:verschieben|verlegen|schieben|legen)\b"
    # the particle after the item: "put the landlord call off to friday", "push the dentist back to Monday"
    rf"|^\s*(?:(?:please|and|also|can\s+you|could\s+you)[,\s]+)*(?:put|push|move|bump|set)\s+(?:[^\s]+\s+){{1,5}}?(?:off|back)\s+(?:to|till|until|for)\s+(?:(?:next|this)\s+)?(?:{_DAY})\b"
    # the item first, then that it can wait: "the card can wait until Saturday", "Die Steuer kann bis
    # Freitag warten", "L'assurance peut attendre jeudi", "Lo del pasaporte puede esperar al lunes"
    rf"|^\s*(?:[^\s]+\s+){{1,5}}?(?:can|could)\s+wait\s+(?:till|until|for|to)\s+(?:(?:next|this)\s+)?(?:{_DAY})\b"
    rf"|^\s*(?:[^\s]+\s+){{1,5}}?(?:kann|könnte)\s+(?:noch\s+)?bis\s+(?:(?:nächsten|zum)\s+)?(?:{_DAY})\s+warten\b"
    rf"|^\s*(?:[^\s]+\s+){{1,5}}?(?:peut|pourra)\s+attendre\s+(?:jusqu['’]\s?(?:à|a|au)\s+)?(?:(?:le|la)\s+)?(?:{_DAY})\b"
    rf"|^\s*(?:[^\s]+\s+){{1,5}}?puede\s+esperar\s+(?:hasta\s+(?:el\s+)?|al\s+|a\s+)?(?:{_DAY})\b",
    re.I,
)


def moves_to_a_day(text: str) -> bool:
    """Whether ``text`` asks to move something to another day ("push the plumber to friday",
    "verschieb den Zahnarzt auf Montag", "Décale le garagiste à lundi"): a statement, not a question."""
    stripped = text.strip()
    return bool(_MOVED.search(stripped)) and not stripped.endswith(("?", "？"))


# A request to note something opens what it keeps: "note that the invoice is paid" keeps a note.
_NOTING = re.compile(
    r"^\s*(?:please\s+)?(?:note|jot|write\s+down|save|remember|keep\s+in\s+mind|notiz|notier\w*|merk\s+dir|note[sz]?|apunta|anota)\b", re.I
)


def says_done(text: str) -> bool:
    """Whether ``text`` says something of the speaker's is done ("I've booked the dentist",
    "Zahnarzt ist erledigt", "c'est fait", "ya llamé al fontanero"): a statement, not a question,
    nor a request to note it."""
    stripped = text.strip()
    return (
        bool(_DONE.search(stripped))
        and not stripped.endswith(("?", "？"))
        and not _ASKING_WORD.match(stripped)
        and not states_duty(stripped)
        and not _NOTING.match(stripped)
        # "Responde a Carlos que ya pagué la factura", "tell the finance team the invoice is paid":
        # what is done is the news passed on, not the request.
        and not asks_reply(stripped)
        and not passes_on(stripped)
    )


# A question word opening the message: "what do I need to get done" asks, even without a "?".
_ASKING_WORD = re.compile(
    r"^\s*(?:(?:what|which|when|where|who|how|why|was|welche\w*|wann|wo|wie|warum|que|quoi|quand|comment|qu[ée]|cu[áa]ndo|c[óo]mo|d[óo]nde|qui[ée]n)\b"
    r"|qu['’]|¿|où(?!\w))",
    re.I,
)


# -- a question announced, not yet asked, in English, German, French and Spanish -------------
# "Just wanted to ask about the invoice", "I was wondering about the bins", "quick question",
# "Ich wollte mal fragen, ...", "Je voulais te demander ...", "Quería preguntarte ...": what
# follows is a question to come; nothing is asked to be kept or done ("... if you could add
# milk" is a request, and stays one).
_ANNOUNCED = re.compile(
    r"^\s*(?:(?:hi|hey|hello|so|oh|ok|um|hallo|salut|hola)[,!]?\s+)*(?:"
    r"(?:i\s+)?(?:just\s+)?(?:wanted|meant)\s+to\s+(?:ask|check|know|say|mention|tell\s+you|talk)|i\s+was\s+(?:just\s+)?wondering|i\s+have\s+a\s+question"
    r"|quick\s+question|(?:ich\s+)?(?:wollte|möchte)\s+(?:dich\s+|sie\s+)?(?:mal\s+|noch\s+|kurz\s+)*(?:fragen|nachfragen|wissen)|kurze\s+frage"
    r"|je\s+(?:voulais|voudrais)\s+(?:te\s+|vous\s+)?(?:demander|savoir|vérifier)|petite\s+question|une\s+question"
    r"|(?:quería|quisiera)\s+(?:preguntar(?:te|le)?|saber|consultar(?:te|le)?)|una\s+pregunta"
    r")\b(?!\s+(?:what|where|when|which|who|how|was|wo|wann|wie|welche\w*|ce|où|quand|comment|qu[ée]|d[óo]nde|cu[áa]ndo|c[óo]mo)\b)"
    r"(?!.*\b(?:if|whether|ob|si)\s+(?:you|du|sie|tu|vous|usted|puedes|podrías)\b)",
    re.I,
)


def announces_question(text: str) -> bool:
    """Whether ``text`` announces a question without asking for anything yet ("Just wanted to
    ask about the invoice", "Ich wollte mal fragen ...", "Quería preguntarte por la factura")."""
    return bool(_ANNOUNCED.match(text))


# -- what was just said, asked to be kept, in English, German, French and Spanish --------------
# "write that down", "Schreib das auf", "Notier dir das", "note ça", "Apunta eso", "Apúntalo",
# "save this: ...": a verb of keeping and a bare pointer, no place named ("put that on my list"
# names one). After a pasted email it asks for a note, not a reply.
_KEPT_BACK = re.compile(
    r"^\s*(?:(?:please|pls|bitte|por\s+favor|and|und|et|y|ok|okay)[,\s]+)*"
    r"(?:(?:note|jot|write|save|keep|remember|schreib\w*|notier\w*|merk|note[sz]?|écri[st]|garde|apunta|anota|guarda|escribe)"
    r"\s+(?:dir\s+|te\s+|me\s+|moi\s+)?(?:that|this|it|das|dies|es|ça|ca|cela|ceci|eso|esto)(?:\s+(?:down|auf|for\s+me))?"
    r"|(?:apúnta|anóta|guárda|escríbe)(?:me|te)?(?:lo|la))(?:\s*[:.!]|\s*$)",
    re.I,
)


# A note asked for, opening the message: "write down that the alarm code is 3396", "note: ...",
# "jot down ...", "Notier dir, dass ...", "Note que ...", "Apunta que ...": what follows is kept as
# a note, whatever the conversation was about (a pasted email, whose reply it is not).
_NOTE_ASKED = re.compile(
    r"^\s*(?:(?:please|pls|bitte|por\s+favor|and|und|et|y|ok|okay|can\s+you|could\s+you)[,\s]+)*"
    r"(?:note(?:\s+down)?\s*(?::|that\b|this\b)|jot\s+(?:down\b|this\b|that\b)|write\s+(?:down\b|this\s+down\b|that\s+down\b)|make\s+a\s+note\b|take\s+a\s+note\b"
    r"|notier\w*(?:\s+dir)?(?:\s*:|,?\s+dass\b)|schreib\w*\s+(?:dir\s+)?auf(?:\s*:|,?\s+dass\b)|merk\s+dir(?:\s*:|,?\s+dass\b)"
    r"|note[sz]?\s*(?::|que\b|qu['’])|prends?\s+note\b"
    r"|apunta(?:te)?\s*(?::|que\b)|anota(?:te)?\s*(?::|que\b))",
    re.I,
)


def asks_note(text: str) -> bool:
    """Whether ``text`` opens by asking for a note ("write down that ...", "note: ...",
    "Notier dir, dass ...", "Note que ...", "Apunta que ...")."""
    return bool(_NOTE_ASKED.match(text))


def keeps_what_was_said(text: str) -> bool:
    """Whether ``text`` asks to keep what was just said ("write that down", "Schreib das auf",
    "note ça", "Apunta eso", "save this: ..."), naming no place to keep it."""
    return bool(_KEPT_BACK.match(text))


def about_the_bot(text: str) -> bool:
    """Whether ``text`` asks about the bot itself ("what can you do", "wer bist du"): small talk."""
    return bool(_ABOUT_THE_BOT.search(text))
