"""Replies that answer: what the embedded model's turn ends with.

A 135M model asked to reply in words apologises for losses nobody suffered, says it is
"an AI", names internal tools ("call list_tasks"), or copies an earlier message. So the
reply is built from what is known wherever it can be, and the model's own words are
checked before they are sent:

- a question the facts answer ("what is my phone number?") gets the fact;
- a search's result becomes the item found (a note, an email, what the person said),
  never the raw result lines with the question itself among them;
- a statement about the person ("my phone number is ...") is acknowledged;
- model words that apologise, refuse, claim an action no tool took ("I'll book it for
  you"), name a tool or copy an earlier message are replaced by an honest "I can't do
  that yet; try ...".

Everything here is pure text work.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from scopehub.hub.models.references import content_words, read_email_number, stem
from scopehub.hub.models.turns import is_copy, same_words
from scopehub.hub.routing.lexicon import is_header_line

__all__ = [
    "CANNOT",
    "acknowledgement",
    "answer_from_facts",
    "answer_from_hits",
    "is_question",
    "result_reply",
    "said_again",
    "tidy",
    "usable",
]

CANNOT = "I can't do that yet; try /help to see what I can do."
NOTHING_FOUND = "I found nothing about that in this chat."
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
_ERROR_HEAD = re.compile(r"^error:\s*(?:\w+ failed:\s*)?", re.I)
# search_memory's lines: "#12 2026-12-02 10:15 [who] snippet"
_HIT = re.compile(r"^#(?P<id>\d+)\s+(?P<when>\d{4}-\d{2}-\d{2} \d{2}:\d{2})\s+\[(?P<who>[^\]]+)\]\s+(?P<text>.*)$")
_FACT_LINE = re.compile(r'^-\s*\[(?P<kind>[\w-]+)\]\s*"(?P<text>.*)"\s*$')
_QUESTION_START = re.compile(
    r"^\s*(?:what|what's|whats|where|where's|when|when's|who|who's|whom|whose|which|how|why|is|are|do|does|did|"
    r"remind me what|wie|was|wo|wann|wer|welche[rsmn]?|quel(?:le)?s?|qu'est|où|quand|qui|"
    r"comment|cuál|cual|qué|que|dónde|donde|cuándo|quién|cómo)\b",
    re.I,
)
# What a small model says when it has nothing to say; none of it answers anything.
_NON_ANSWER = re.compile(
    r"\b(?:sorry|apologi[sz]e|as an ai|as a language model|language model|i(?:'m| am) (?:just )?an? (?:ai|assistant|bot)|"
    r"i (?:can ?not|can't|could not|couldn't|am unable to|am not able to|don't have (?:access|the ability))|"
    r"your loss|condolences|consult a|seek professional)\b",
    re.I,
)
# Words said without a tool having run, so any claim of having done (or going to do)
# something is untrue: "I'll make sure to book it for you", "I've added it", "Done!".
_CLAIMED_ACTION = re.compile(
    r"\b(?:i(?:'ll| will|'ve| have| just)|i am going to|i'm going to|let me)\s+(?:\w+\s+){0,2}?"
    r"(?:add|added|book|booked|save|saved|remind|set|schedule|scheduled|send|sent|forward|forwarded|"
    r"mark|marked|update|updated|delete|deleted|remove|removed|cancel|cancelled|canceled|make sure|take care|"
    r"put|create|created|draft|drafted|move|moved|change|changed|complete|completed|pass|passed|"
    # a promise no tool keeps: "You're welcome! I'll try that again soon."
    r"try|tried|check|checked|look into|get back)\b"
    r"|^\W*(?:done|all done|added|saved|booked|scheduled)\b",
    re.I,
)
_INTERNAL_NAME = re.compile(r"\b[a-z]+_[a-z_]+\b")
# Question words whose answer a fact names in other words ("what am I called" -> name).
_ASKED_FOR = {
    "called": {"name", "call"},
    "name": {"name", "call"},
    "live": {"live", "home", "lives", "hometown"},
    "work": {"work", "employer", "job", "works"},
    "phone": {"phone", "number", "mobile"},
    "number": {"number", "phone"},
    "allergic": {"allergic", "allergy"},
    "email": {"email", "mail", "address"},
    "wohne": {"live", "wohne", "home"},
    "telefonnummer": {"phone", "telefonnummer", "number"},
    "teléfono": {"phone", "teléfono", "número", "number"},
    "téléphone": {"phone", "téléphone", "numéro", "number"},
}
_ASKED_BY_STEM = {stem(word): forms for word, forms in _ASKED_FOR.items()}
_ACKNOWLEDGE = {
    "en": "Noted, thanks for telling me.",
    "de": "Notiert, danke!",
    "fr": "C'est noté, merci !",
    "es": "Anotado, ¡gracias!",
    "it": "Annotato, grazie!",
    "pt": "Anotado, obrigado!",
    "nl": "Genoteerd, bedankt!",
}


def is_question(text: str) -> bool:
    """Whether the message asks for something to be told (a question mark, or a question word first)."""
    stripped = text.strip()
    return stripped.endswith(("?", "？", "؟")) or bool(_QUESTION_START.match(stripped))


# "what did the bank want?", "was wollte die Hausverwaltung?", "qu'est-ce que l'école demande ?",
# "¿qué quería la aseguradora?": what someone else asked or wrote, i.e. what their message says.
_ASKS_WHAT_SOMEONE_WANTED = re.compile(
    r"^\s*(?:so\s+|and\s+)?(?:what|what's)\s+(?:did|does|do|has|have)\s+(?!i\b|we\b|you\b)\S+(?:\s+\S+){0,3}?\s+(?:want|ask|need|say|write|request)"
    r"|^\s*was\s+(?:wollte|will|möchte|schreibt|schrieb|braucht|verlangt|sagt)\s+(?!ich\b)"
    r"|^\s*qu['’]est-ce\s+que\s+(?!je\b|j['’])\S.*\b(?:demande|demandait|veut|voulait|dit|écrit)\b"
    r"|^\s*¿?\s*qu[ée]\s+(?:quería|quiere|pide|pidió|pedía|dice|dijo|escribió|necesita)\b(?!\s+yo\b)",
    re.I,
)


def asks_what_someone_wanted(text: str) -> bool:
    """Whether ``text`` asks what someone else wanted, asked or wrote (what their email says)."""
    return bool(_ASKS_WHAT_SOMEONE_WANTED.search(text))


def tidy(text: str, sentences: int = 2) -> str:
    """The model's words without template debris or a copied agent label, at most
    ``sentences`` sentences, and no half sentence when max_tokens cut it off."""
    answer = re.sub(r"<\|im_(?:start|end)\|>|<(?:start|end)_of_turn>", "", text).strip()
    answer = re.sub(r"^(?:Assistant|User)\s*:\s*", "", answer).strip()
    answer = re.sub(r"^\[[\w-]+ agent\]\s*", "", answer).strip().strip('"').strip()
    parts = _SENTENCE_END.split(answer)
    if len(parts) > 1 and parts[-1] and parts[-1][-1] not in ".!?)":
        parts = parts[:-1]  # cut off mid-sentence
    return " ".join(parts[:sentences]).strip()


# A reply to thanks ("you're welcome", "glad you found my help helpful", "I'm glad you enjoyed
# ...") fits only a message that thanks; after "hi there" or "c'est fait" it answers nothing said.
_WELCOMING = re.compile(
    r"\b(?:you(?:'re|’re| are)\s+(?:very\s+|most\s+|so\s+)?welcome|glad\s+(?:you|i\s+could)"
    r"|my\s+pleasure|gern\s+geschehen|keine\s+ursache|de\s+rien|avec\s+plaisir|de\s+nada|no\s+hay\s+de\s+qu[ée])\b",
    re.I,
)
_THANKS = re.compile(r"\b(?:thanks?|thank\s+you|thx|ty|cheers|ta|danke\w*|merci|gracias|grazie|obrigad[oa])\b", re.I)


# What acknowledges thanks besides _WELCOMING's words: a reply to a bare "thanks!" that says
# neither ("That's great! You can also use it for tasks like that.") answers nothing said.
_ACKNOWLEDGING = re.compile(
    r"\b(?:any\s*time|no\s+(?:problem|worries)|happy\s+to\s+help|glad|pleasure|gerne?|bitte|je\s+vous\s+en\s+prie"
    r"|a\s+ti|con\s+gusto|welcome)\b",
    re.I,
)
_BARE_THANKS_WORDS = 4  # "thanks!", "thank you so much", "danke dir", "merci beaucoup !"


def answers_thanks_not_given(answer: str, message: str) -> bool:
    """Whether ``answer`` replies to thanks that ``message`` does not give."""
    return bool(_WELCOMING.search(answer)) and not _THANKS.search(message)


def ignores_thanks(answer: str, message: str) -> bool:
    """Whether ``message`` only thanks (a few words, no question) and ``answer`` does not acknowledge it."""
    words = re.findall(r"[^\W\d_]+", message)
    bare = bool(_THANKS.search(message)) and len(words) <= _BARE_THANKS_WORDS and "?" not in message
    return bare and not (_WELCOMING.search(answer) or _ACKNOWLEDGING.search(answer))


def usable(answer: str, earlier: Iterable[str], tool_names: Iterable[str] = (), message: str | None = None) -> bool:
    """Whether the model's words may be sent: not empty, no apology or refusal, no claim of
    an action (no tool ran), no internal tool name, no copy of an earlier message, and (given
    the ``message`` it answers) no reply to thanks nobody gave, none that ignores the thanks given."""
    if not answer or _NON_ANSWER.search(answer) or _CLAIMED_ACTION.search(answer):
        return False
    if message is not None and (answers_thanks_not_given(answer, message) or ignores_thanks(answer, message)):
        return False
    names = set(tool_names)
    if any(word in names for word in _INTERNAL_NAME.findall(answer)):
        return False
    return not is_copy(answer, earlier)


_SWAPS = (
    (r"\bI am\b|\bI'm\b", "you're"), (r"\bI\b", "you"), (r"\bmy\b", "your"), (r"\bme\b", "you"),
    (r"\bmine\b", "yours"), (r"\bmyself\b", "yourself"), (r"\bwe are\b|\bwe're\b", "you're"),
    (r"\bwe\b", "you"), (r"\bour\b", "your"),
)  # fmt: skip


def _in_second_person(sentence: str) -> str:
    """An English statement about the speaker said back to them ("my phone is 5" -> "your phone is 5")."""
    text = sentence.strip().rstrip(".!")
    for pattern, replacement in _SWAPS:
        text = re.sub(pattern, replacement, text, flags=re.I)
    return text


def acknowledgement(message: str, language: str) -> str:
    """A short thank-you for something the person told about themselves, in their
    language; in English it says back what was understood ("Noted: your phone number is ...")."""
    if language == "en" and len(message) <= 200 and "\n" not in message.strip():
        return f"Noted: {_in_second_person(message)}."
    return _ACKNOWLEDGE.get(language, _ACKNOWLEDGE["en"])


def _facts(block: str) -> list[str]:
    return [match["text"] for line in block.splitlines() if (match := _FACT_LINE.match(line.strip()))]


# Forms of "to be" in German, French and Spanish ("Wie war meine Nummer?"): they ask nothing of a fact.
_COPULAS = frozenset({"ist", "war", "sind", "waren", "wäre", "est", "était", "sont", "étaient", "era", "eran", "fue", "son", "está", "estaba"})
COMPOUND_PART = 4  # letters of a word a German compound may end with ("Nummer" in "Telefonnummer")


def _asked_words(question: str) -> dict[str, set[str]]:
    """Each content word of the question with the words a fact may say it in."""
    return {
        word: {word, *(stem(item) for item in _ASKED_BY_STEM.get(word, ()))}
        for word in content_words(question)
        if word not in _COPULAS
    }


def _says(forms: set[str], have: set[str]) -> bool:
    """Whether a fact's words ``have`` say one of ``forms``: the word itself, or a compound
    ending with it ("Telefonnummer" says "Nummer", "Handynummer" too)."""
    return bool(forms & have) or any(len(form) >= COMPOUND_PART and word.endswith(form) for form in forms for word in have)


def _second_person(fact: str) -> str:
    """ "User's phone number is 5" -> "Your phone number is 5"; "User lives in X" -> "You live in X"."""
    text = re.sub(r"^(?:the )?user's\b", "Your", fact.strip(), flags=re.I)
    text = re.sub(r"^(?:the )?user is\b", "You are", text, flags=re.I)
    text = re.sub(r"^(?:the )?user (\w+?)s\b", r"You \1", text, flags=re.I)
    text = re.sub(r"^my\b", "Your", text, flags=re.I)
    text = re.sub(r"^i am\b|^i'm\b", "You are", text, flags=re.I)
    text = re.sub(r"^i\b", "You", text, flags=re.I)
    return text if text.endswith((".", "!", "?")) else text + "."


def answer_from_facts(question: str, facts_block: str, *, whole: bool = False) -> str | None:
    """The fact that answers ``question`` ("what is my phone number?"), in the second
    person; None when no fact shares a content word with it (with ``whole``: unless a
    fact has every content word of the question, in one of its forms)."""
    wanted = _asked_words(question)
    if not wanted or not facts_block:
        return None
    best, best_score = None, 0
    for fact in _facts(facts_block):
        have = content_words(fact)
        score = sum(1 for forms in wanted.values() if _says(forms, have))
        if score > best_score:
            best, best_score = fact, score
    if best is None or (whole and best_score < len(wanted)):
        return None
    return _second_person(best)


def answer_from_hits(question: str, result: str) -> str:
    """The item a search found, said as an answer: a note or an email first, else what
    the person said; never the question itself, a question, or one of the bot's replies."""
    wanted = content_words(question)
    candidates: list[tuple[int, int, str, str]] = []
    for line in result.splitlines():
        match = _HIT.match(line.strip())
        if not match:
            continue
        who, text = match["who"], match["text"].strip().strip("…").strip()
        if is_question(text) or is_copy(text, [question]):
            continue
        if who.split(" #")[0] in ("note", "email"):
            rank = 0
        elif who == "user" or who.startswith("knowledge"):
            rank = 1
        else:
            continue  # a reply of the bot's: not what the person kept
        overlap = len(wanted & content_words(text))
        candidates.append((-overlap, rank, text, who))
    if not candidates or (candidates[0][0] == 0 and not wanted):
        return NOTHING_FOUND
    candidates.sort(key=lambda item: (item[0], item[1]))
    overlap, _, text, who = candidates[0]
    if overlap == 0:
        return NOTHING_FOUND
    kind = who.split(" #")[0]
    source = {"note": "From your notes", "email": "From your emails"}.get(kind, "You told me")
    if kind == "email":
        # An email says several things: the sentence that answers the question, not its header.
        text = _best_sentence(question, text, set()) or text
    return f"{source}: {text}"


def result_reply(name: str, result: str, question: str = "") -> str:
    """The reply for a tool's result: the result itself, a search as the item it found,
    errors said plainly."""
    if not result:
        return "Done."
    if result.startswith("error:"):
        return "That did not work: " + _ERROR_HEAD.sub("", result)
    if name == "search_memory":
        return NOTHING_FOUND if result == "no results" else answer_from_hits(question, result)
    if question and is_question(question) and read_email_number(result) is not None:
        focused = _answering_sentence(question, result)
        if focused is not None:
            return focused
    return _without_tool_hints(result)


# Sentences end at ".", "!", "?" (or a line), but not at a German ordinal ("am Dienstag, 9. Dezember, kommt ...").
_PARTS = re.compile(r"(?<=[.!?])(?<!\b\d\.)(?<!\b\d\d\.)\s+|\n+")
# What a question asks for besides its words: a moment, an amount, or what someone asked.
_ASKS_WHEN = re.compile(
    r"\b(?:when|what time|deadline|due|by when|until when|wann|bis wann|welche[nm]? tag|quand|quelle heure|date limite|"
    r"cuándo|cuando|a qué hora|plazo|vence|vencimiento)\b",
    re.I,
)
_ASKS_AMOUNT = re.compile(
    r"\b(?:how much|how many|cost|costs|price|wie ?viel|kostet|kosten|combien|coûte|coute|cuánto|cuánta|cuanto|cuesta|precio)\b", re.I
)


def asks_amount_or_moment(question: str) -> bool:
    """Whether ``question`` asks for an amount ("how much do I owe them?", "Was kostet das?",
    "C'est combien ?") or a moment ("when is it?", "Wann ist die Ablesung?")."""
    return bool(_ASKS_AMOUNT.search(question) or _ASKS_WHEN.search(question))


def without_asking(question: str) -> str:
    """``question`` without the words that ask for an amount or a moment ("how much", "wann")."""
    return _ASKS_WHEN.sub(" ", _ASKS_AMOUNT.sub(" ", question))


# Small talk, by kind, and its plain answer per language: what is said when the model's own
# words do not answer (a greeting answered "you're welcome", a goodbye with a refusal).
_SMALL_TALK = (
    (
        re.compile(r"\b(?:how are you|how(?:'s|’s| is) it going|how are things|wie geht|comment (?:ça|ca) va|comment vas-tu|comment allez-vous|ça va\s*\?|qu[ée] tal|c[óo]mo est[áa]s?)", re.I),
        {"en": "I'm fine, thanks! How can I help?", "de": "Mir geht's gut, danke! Wie kann ich helfen?",
         "fr": "Ça va bien, merci ! Comment puis-je aider ?", "es": "¡Bien, gracias! ¿En qué puedo ayudar?"},
    ),
    (
        _THANKS,
        {"en": "You're welcome!", "de": "Gern geschehen!", "fr": "Avec plaisir !", "es": "¡De nada!"},
    ),
    (
        re.compile(r"\b(?:bye|goodbye|see you|good night|tschüss|tschüs|ciao|bis bald|gute nacht|au revoir|à bientôt|bonne (?:soirée|nuit)|adiós|adios|hasta (?:luego|pronto|mañana))\b", re.I),
        {"en": "Bye, see you soon!", "de": "Tschüss, bis bald!", "fr": "Au revoir, à bientôt !", "es": "¡Adiós, hasta pronto!"},
    ),
    (
        re.compile(r"^\W*(?:hi|hello|hey|hiya|howdy|yo|morning|evening|good\s+(?:morning|afternoon|evening)|hallo|moin|servus|grüß\s+dich|guten\s+(?:morgen|tag|abend)"
                   r"|salut|bonjour|bonsoir|coucou|hola|buenos\s+días|buenas(?:\s+tardes|\s+noches)?)\b", re.I),
        {"en": "Hello! How can I help you today?", "de": "Hallo! Wie kann ich helfen?",
         "fr": "Bonjour ! Comment puis-je vous aider ?", "es": "¡Hola! ¿En qué puedo ayudarte?"},
    ),
)  # fmt: skip


def small_talk_reply(message: str) -> str | None:
    """The plain answer to a greeting, a thanks, a goodbye or a "how are you" in the message's
    language (English where it is none of German, French, Spanish); None for anything else."""
    from scopehub.hub.routing.lexicon import language_of

    language = language_of(message)
    if language not in ("de", "fr", "es"):
        # A word or two ("Moin", "Salut !", "¡Hola!") is too short to tell the language by; its greeting tells it.
        said = {stem(word) for word in re.findall(r"[^\W\d_]+", message.lower())}
        language = next((lang for lang, words in _GREETING_LANGUAGE.items() if said & words), language)
    for pattern, replies in _SMALL_TALK:
        if pattern.search(message):
            return replies.get(language, replies["en"])
    return None


SMALL_TALK_WORDS = 3  # at most this many words: "hi there", "Buenas tardes", "thanks, bye", "Merci, bonne soirée"


def is_small_talk(message: str) -> bool:
    """Whether the whole message is a greeting, a thanks, a goodbye or a "how are you" (a few
    words, one of those kinds): nothing to store, list or search for."""
    return len(message.split()) <= SMALL_TALK_WORDS and small_talk_reply(message) is not None


_GREETING_LANGUAGE = {
    "de": {stem(w) for w in ("hallo", "moin", "servus", "guten", "danke", "tschüss", "tschüs", "geht")},
    "fr": {stem(w) for w in ("salut", "bonjour", "bonsoir", "coucou", "merci", "revoir", "ça")},
    "es": {stem(w) for w in ("hola", "buenos", "buenas", "gracias", "adiós", "hasta", "qué", "tal")},
}
_ASKS_REQUEST = re.compile(
    r"\b(?:want|wants|wanted|ask|asks|asked|need|needs|needed|request|wollte|will|möchte|braucht|verlangt|demande|demandé|veut|voulait|"
    r"quería|quiere|pide|pidió|necesita)\b",
    re.I,
)
_REQUESTING = re.compile(
    r"\b(?:please|could you|can you|would you|we need you|need you to|you need to|must|bitte|kannst du|könnten sie|können sie|"
    r"merci de|pouvez-vous|peux-tu|veuillez|il faut|por favor|envíenos|envíe|puede|podrías|necesitamos|debe)\b",
    re.I,
)
_AMOUNT = re.compile(r"\d(?:[\d.,]*\d)?\s*(?:€|euros?|eur|dollars?|\$|£|pounds?|francs?|chf|%|kr)\b|[€$£]\s*\d", re.I)


def _answering_sentence(question: str, result: str) -> str | None:
    """The sentence of a read email ("Email #3: subject", "From: ...", then its text) that
    answers ``question`` ("what was the deadline?" -> the one with a day in it), after the
    email's first line; None when none stands out."""
    lines = result.splitlines()
    head, rest = lines[0], lines[1:]
    header = [line for line in rest if is_header_line(line)]
    body = "\n".join(line for line in rest if not is_header_line(line))
    naming = content_words(" ".join([head, *header]))  # the words that say which email it is
    best = _best_sentence(question, body, naming)
    if best is None:
        return None
    return f"{head}\n{best}"


def _best_sentence(question: str, body: str, naming: set[str]) -> str | None:
    """The sentence of ``body`` that answers ``question`` best: its words (less ``naming``,
    the words that only say which item it is), and a moment, an amount or a request when
    the question asks for one; None when no sentence scores."""
    from scopehub.agents import date_spans, parse_time, to_english

    wanted = content_words(question) - naming
    best, best_score = None, 0
    for part in _PARTS.split(body):
        sentence = part.strip()
        if len(sentence.split()) < 4:
            continue  # "Dear customer,", "Regards,", a name
        score = len(wanted & content_words(sentence))
        english = to_english(sentence)
        if _ASKS_WHEN.search(question) and (date_spans(english) or parse_time(english)):
            score += 2
        if _ASKS_AMOUNT.search(question) and re.search(r"\d", sentence):
            # A sum of money counts most; a bare number that is no day, somewhat.
            score += 2 if _AMOUNT.search(sentence) else 0 if date_spans(english) else 1
        if _ASKS_REQUEST.search(question) and _REQUESTING.search(sentence):
            score += 2
        if score > best_score:
            best, best_score = sentence, score
    return best


def _without_tool_hints(result: str) -> str:
    """A tool's own hint to a model ("call list_tasks to see the ids") said for a person."""
    return re.sub(r";?\s*call ([a-z]+)_([a-z]+)(?: or [a-z_]+)?(?: to see the ids)?\.?", lambda m: f"; say 'show my {m[2]}' to see them.", result)


def first_sentence(text: str) -> str:
    """The first sentence of ``text``."""
    return _SENTENCE_END.split(text.strip(), maxsplit=1)[0] if text else ""


def join_lines(lines: Sequence[str]) -> str:
    return "\n".join(line for line in lines if line)


# A question said to be asked again ("what was the code again?", "Wie war das nochmal?", "C'est
# quoi encore ?", "¿Cuál era otra vez?") gets the same answer as before: said as a repeat, so it
# reads as an answer to this question, not as a reply copied from earlier.
_AGAIN = re.compile(r"\b(?:again|once\s+more|nochmal|noch\s+einmal|wieder|encore|de\s+nouveau|otra\s+vez|de\s+nuevo)\b", re.I)
_AS_SAID = {"en": "As I said: ", "de": "Wie gesagt: ", "fr": "Comme je disais : ", "es": "Como te decía: "}


def said_again(message: str, reply: str, earlier: Iterable[str]) -> str:
    """``reply``, marked as said before when ``message`` asks again and ``reply`` repeats an
    ``earlier`` reply word for word; else ``reply`` unchanged."""
    from scopehub.hub.routing.lexicon import language_of

    if not _AGAIN.search(message) or not same_words(reply, earlier):
        return reply
    said = reply[:1].lower() + reply[1:] if reply[1:2].islower() else reply
    return _AS_SAID.get(language_of(message), _AS_SAID["en"]) + said
