"""Date and time words of German, French and Spanish said the English way, for ``_dates``.

The tools' date parsing reads English ("friday", "in 3 days", "tomorrow at 9"). People
write "bis Freitag", "demain à 8h", "en 10 minutos", and the embedded model copies their
words into a tool's arguments, so :func:`to_english` rewrites those words first: weekdays,
months, today/tomorrow, next week, durations, clock times and the little words before a
date. Words of other languages pass unchanged (they stay unreadable, as before).

Why not ``dateparser``: it reads far more languages, but pulls ``regex``, ``pytz`` and
``tzlocal`` rules of its own and loads its language data on first use, while the parsing
here must stay deterministic, relative to an explicit ``today`` and run on every tool
call; the four languages the built-in agents' phrasings cover need only these tables.
"""

from __future__ import annotations

import re

__all__ = ["to_english"]

_WEEKDAYS = {
    "monday": ("montag", "lundi", "lunes"),
    "tuesday": ("dienstag", "mardi", "martes"),
    "wednesday": ("mittwoch", "mercredi", "miércoles", "miercoles"),
    "thursday": ("donnerstag", "jeudi", "jueves"),
    "friday": ("freitag", "vendredi", "viernes"),
    "saturday": ("samstag", "sonnabend", "samedi", "sábado", "sabado"),
    "sunday": ("sonntag", "dimanche", "domingo"),
}
_MONTHS = {
    "january": ("januar", "jänner", "janvier", "enero"),
    "february": ("februar", "février", "fevrier", "febrero"),
    "march": ("märz", "maerz", "mars", "marzo"),
    "april": ("avril", "abril"),
    "may": ("mai", "mayo"),
    "june": ("juni", "juin", "junio"),
    "july": ("juli", "juillet", "julio"),
    "august": ("août", "aout", "agosto"),
    "september": ("septembre", "septiembre", "setiembre"),
    "october": ("oktober", "octobre", "octubre"),
    "november": ("novembre", "noviembre"),
    "december": ("dezember", "décembre", "decembre", "diciembre"),
}
_UNITS = {
    # "minutes" is French as well as English: "dans 15 minutes", "toutes les 10 minutes".
    "minutes": ("minuten", "minutes", "minute", "minutos", "minuto", "min"),
    "hours": ("stunden", "stunde", "heures", "heure", "horas", "hora"),
    "days": ("tagen", "tage", "tag", "jours", "jour", "días", "dias", "día", "dia"),
    "weeks": ("wochen", "woche", "semaines", "semaine", "semanas", "semana"),
    "months": ("monaten", "monate", "monat", "mois", "meses", "mes"),
}
_NUMBERS = {
    "1": ("ein", "eine", "einer", "einem", "einen", "un", "une", "una", "uno"),
    "2": ("zwei", "deux", "dos"),
    "3": ("drei", "trois", "tres"),
    "4": ("vier", "quatre", "cuatro"),
    "5": ("fünf", "cinq", "cinco"),
    "10": ("zehn", "dix", "diez"),
}


def _alternation(words: tuple[str, ...] | list[str]) -> str:
    return "|".join(sorted((re.escape(word) for word in words), key=len, reverse=True))


def _lookup(table: dict[str, tuple[str, ...]]) -> dict[str, str]:
    return {word: english for english, words in table.items() for word in words}


_WEEKDAY_OF = _lookup(_WEEKDAYS)
_MONTH_OF = _lookup(_MONTHS)
_UNIT_OF = _lookup(_UNITS)
_NUMBER_OF = _lookup(_NUMBERS)
_EN_WEEKDAY = "monday|tuesday|wednesday|thursday|friday|saturday|sunday"
_EN_MONTH = "|".join(_MONTHS)

# Whole phrases first (longest first where one contains another), then single words.
_PHRASES: tuple[tuple[str, str], ...] = (
    (r"übermorgen|après-demain|apres-demain|pasado mañana", "day after tomorrow"),
    (r"mañana por la mañana|demain matin|morgen früh|morgen vormittag", "tomorrow morning"),
    (r"mañana por la tarde|demain après-midi|morgen nachmittag", "tomorrow afternoon"),
    (r"mañana por la noche|demain soir|morgen abend", "tomorrow evening"),
    (r"heute abend|ce soir|esta noche", "tonight"),
    (r"heute morgen|ce matin|esta mañana", "this morning"),
    (r"por la mañana|am morgen|le matin", "morning"),
    (r"por la tarde|am nachmittag|l'après-midi", "afternoon"),
    (r"por la noche|am abend|le soir", "evening"),
    (r"(?<!guten )morgen|demain|mañana", "tomorrow"),
    (r"heute|aujourd'hui|aujourd’hui|hoy", "today"),
    (r"(?:nächste|nächster|kommende) woche|la semaine prochaine|la próxima semana|la semana que viene|la semana próxima", "next week"),
    (r"(?:nächsten|kommenden) monat|le mois prochain|el próximo mes|el mes que viene", "next month"),
    (r"ende der woche|fin de semaine|fin de la semaine|fin de semana|finales de semana", "end of the week"),
    (r"ende des monats|fin du mois|fin de mes|final de mes", "end of the month"),
    (r"einer halben stunde|une demi-heure|media hora", "half an hour"),
    (r"mittag|midi|mediodía", "noon"),
    (r"täglich|jeden tag|tous les jours|chaque jour|todos los días|cada día", "every day"),
    (r"wöchentlich|jede woche|toutes les semaines|chaque semaine|todas las semanas|cada semana", "every week"),
    (r"stündlich|jede stunde|toutes les heures|cada hora", "every hour"),
)
_PHRASE_RES = tuple((re.compile(rf"\b(?:{pattern})\b", re.I), english) for pattern, english in _PHRASES)
_WORD_RE = re.compile(rf"\b(?:{_alternation(list(_WEEKDAY_OF) + list(_MONTH_OF))})\b", re.I)
_NEXT_RE = re.compile(
    rf"\b(?:(?:nächsten|nächster|kommenden|el próximo|el proximo|este)\s+({_EN_WEEKDAY})|({_EN_WEEKDAY})\s+(?:prochain|que viene))\b",
    re.I,
)
_DURATION_RE = re.compile(
    rf"\b(?:in|dans|en|nach)\s+(\d+|{_alternation(list(_NUMBER_OF))})\s+({_alternation(list(_UNIT_OF))})\b", re.I
)
_EVERY_RE = re.compile(
    rf"\b(?:alle|toutes les|tous les|cada)\s+(\d+)\s+({_alternation(list(_UNIT_OF))})\b", re.I
)
_DAY_MONTH_RE = re.compile(rf"\b(\d{{1,2}})(?:\.|\s+de)?\s+({_EN_MONTH})\b", re.I)
_CLOCK_RE = re.compile(r"\b(?:(?:um|à|a las|a la)\s+)?(\d{1,2})(?:h(\d{2})|[:.](\d{2})\s*uhr|\s*uhr|h)(?!\w)", re.I)
_AT_RE = re.compile(r"\b(?:um|à|a las|a la)\s+(\d{1,2})(?:[:.](\d{2}))?\b", re.I)
# The little words before a date ("bis Freitag", "avant lundi", "para el lunes"): "by".
_BEFORE_RE = re.compile(
    rf"\b(?:bis\s+(?:spätestens\s+)?(?:zum\s+|am\s+)?|spätestens\s+(?:am\s+)?|avant\s+(?:le\s+)?|d'ici\s+(?:le\s+|à\s+)?|"
    rf"para\s+el\s+|antes\s+del?\s+|hasta\s+el\s+)(?=(?:{_EN_WEEKDAY}|{_EN_MONTH}|\d|tomorrow|today|next|end|day after))",
    re.I,
)
_ON_RE = re.compile(rf"\b(?:am|le|el|zum)\s+(?=(?:{_EN_WEEKDAY}|\d{{1,2}}\s+(?:{_EN_MONTH})))", re.I)


def _duration(match: re.Match[str]) -> str:
    amount = _NUMBER_OF.get(match[1].lower(), match[1])
    return f"in {amount} {_UNIT_OF[match[2].lower()]}"


def _clock(match: re.Match[str]) -> str:
    minutes = next((group for group in match.groups()[1:] if group), "00")
    return f"at {int(match[1])}:{minutes}"


def to_english(text: str) -> str:
    """``text`` with the German, French and Spanish date and time words it has said in
    English (lower-cased where rewritten); English text comes back as it was."""
    out = text
    for pattern, english in _PHRASE_RES:
        out = pattern.sub(english, out)
    out = _WORD_RE.sub(lambda m: _WEEKDAY_OF.get(m[0].lower()) or _MONTH_OF[m[0].lower()], out)
    out = _NEXT_RE.sub(lambda m: f"next {(m[1] or m[2]).lower()}", out)
    out = _DURATION_RE.sub(_duration, out)
    out = _EVERY_RE.sub(lambda m: f"every {m[1]} {_UNIT_OF[m[2].lower()]}", out)
    out = _DAY_MONTH_RE.sub(lambda m: f"{m[1]} {m[2].lower()}", out)
    out = _CLOCK_RE.sub(_clock, out)
    out = _AT_RE.sub(_clock, out)
    out = _BEFORE_RE.sub("by ", out)
    return _ON_RE.sub("on ", out)
