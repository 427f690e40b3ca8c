"""Due dates and reminder times as people say them, on a fixed calendar."""

from __future__ import annotations

from datetime import date, datetime
from zoneinfo import ZoneInfo

import pytest

from scopehub.agents._dates import find_dates, parse_date, parse_repeat, parse_when

WEDNESDAY = date(2024, 5, 1)


@pytest.mark.parametrize(
    ("phrase", "expected"),
    [
        ("2024-05-09", date(2024, 5, 9)),
        ("today", WEDNESDAY),
        ("tomorrow", date(2024, 5, 2)),
        ("day after tomorrow", date(2024, 5, 3)),
        ("friday", date(2024, 5, 3)),
        ("Friday", date(2024, 5, 3)),
        ("by fri", date(2024, 5, 3)),
        ("next monday", date(2024, 5, 6)),
        ("wednesday", date(2024, 5, 8)),  # said on a Wednesday: the next one
        ("in 3 days", date(2024, 5, 4)),
        ("in a week", date(2024, 5, 8)),
        ("in 2 months", date(2024, 7, 1)),
        ("next week", date(2024, 5, 6)),
        ("end of week", date(2024, 5, 3)),
        ("end of month", date(2024, 5, 31)),
        ("March 3", date(2025, 3, 3)),  # already past this year: next year's
        ("May 1", WEDNESDAY),
        ("3rd of June", date(2024, 6, 3)),
        ("Jun 3rd, 2026", date(2026, 6, 3)),
    ],
)
def test_parse_date_reads_what_people_say(phrase: str, expected: date) -> None:
    assert parse_date(phrase, WEDNESDAY) == expected


@pytest.mark.parametrize("phrase", ["someday", "month", "sunny", "February 30", ""])
def test_parse_date_gives_up_instead_of_guessing(phrase: str) -> None:
    assert parse_date(phrase, WEDNESDAY) is None


BERLIN = ZoneInfo("Europe/Berlin")
NOW = datetime(2024, 5, 1, 14, 30, tzinfo=BERLIN)


@pytest.mark.parametrize(
    ("phrase", "expected"),
    [
        ("in 10 minutes", datetime(2024, 5, 1, 14, 40, tzinfo=BERLIN)),
        ("in an hour", datetime(2024, 5, 1, 15, 30, tzinfo=BERLIN)),
        ("in half an hour", datetime(2024, 5, 1, 15, 0, tzinfo=BERLIN)),
        ("tomorrow 9am", datetime(2024, 5, 2, 9, 0, tzinfo=BERLIN)),
        ("tomorrow at 9:30", datetime(2024, 5, 2, 9, 30, tzinfo=BERLIN)),
        ("at 18:00", datetime(2024, 5, 1, 18, 0, tzinfo=BERLIN)),
        ("at 9", datetime(2024, 5, 2, 9, 0, tzinfo=BERLIN)),  # 9:00 has passed today
        ("friday 10am", datetime(2024, 5, 3, 10, 0, tzinfo=BERLIN)),
        ("18:00 tomorrow", datetime(2024, 5, 2, 18, 0, tzinfo=BERLIN)),
        ("tomorrow", datetime(2024, 5, 2, 9, 0, tzinfo=BERLIN)),
        ("tonight", datetime(2024, 5, 1, 20, 0, tzinfo=BERLIN)),
        ("2024-05-02T08:00", datetime(2024, 5, 2, 8, 0, tzinfo=BERLIN)),
        ("2024-05-02 08:00", datetime(2024, 5, 2, 8, 0, tzinfo=BERLIN)),
        ("2024-05-02T08:00:00+00:00", datetime(2024, 5, 2, 10, 0, tzinfo=BERLIN)),
        # What a model copies out of "remind me in 2 minutes ..." or "... tomorrow morning".
        ("2 minutes", datetime(2024, 5, 1, 14, 32, tzinfo=BERLIN)),
        ("1 hour", datetime(2024, 5, 1, 15, 30, tzinfo=BERLIN)),
        ("tomorrow morning", datetime(2024, 5, 2, 9, 0, tzinfo=BERLIN)),
        ("friday evening", datetime(2024, 5, 3, 19, 0, tzinfo=BERLIN)),
    ],
)
def test_parse_when_in_the_persons_zone(phrase: str, expected: datetime) -> None:
    assert parse_when(phrase, NOW) == expected


def test_parse_when_explains_what_it_cannot_read() -> None:
    with pytest.raises(ValueError, match="in 10 minutes"):
        parse_when("whenever you like", NOW)


@pytest.mark.parametrize(
    ("phrase", "seconds"),
    [("none", None), ("", None), ("daily", 86400), ("hourly", 3600), ("weekly", 604800),
     ("every 10 minutes", 600), ("every 2 hours", 7200), ("every 3 days", 259200), ("every monday", 604800)],
)
def test_parse_repeat(phrase: str, seconds: int | None) -> None:
    assert parse_repeat(phrase) == seconds


def test_parse_repeat_rejects_nonsense_and_floods() -> None:
    with pytest.raises(ValueError):
        parse_repeat("sometimes")
    with pytest.raises(ValueError):
        parse_repeat("every 0 minutes")


def test_find_dates_in_running_text_skips_lookalikes() -> None:
    text = "Please send it by Friday. We meet on March 3; the invoice is due 2024-05-10. I sat down on the mat."
    assert find_dates(text, WEDNESDAY) == [
        ("Friday", date(2024, 5, 3)),
        ("March 3", date(2025, 3, 3)),
        ("2024-05-10", date(2024, 5, 10)),
    ]


@pytest.mark.parametrize(
    ("phrase", "expected"),
    [
        ("bis Montag", date(2024, 5, 6)),
        ("Freitag", date(2024, 5, 3)),
        ("morgen", date(2024, 5, 2)),
        ("übermorgen", date(2024, 5, 3)),
        ("nächsten Dienstag", date(2024, 5, 7)),
        ("in 3 Tagen", date(2024, 5, 4)),
        ("3. März", date(2025, 3, 3)),
        ("demain", date(2024, 5, 2)),
        ("avant vendredi", date(2024, 5, 3)),
        ("la semaine prochaine", date(2024, 5, 6)),
        ("le 3 juin", date(2024, 6, 3)),
        ("mañana", date(2024, 5, 2)),
        ("para el lunes", date(2024, 5, 6)),
        ("el 5 de junio", date(2024, 6, 5)),
        ("en 2 semanas", date(2024, 5, 15)),
    ],
)
def test_parse_date_reads_german_french_and_spanish(phrase: str, expected: date) -> None:
    assert parse_date(phrase, WEDNESDAY) == expected


@pytest.mark.parametrize(
    ("phrase", "expected"),
    [
        ("morgen um 8 Uhr", datetime(2024, 5, 2, 8, 0, tzinfo=BERLIN)),
        ("um 18 Uhr", datetime(2024, 5, 1, 18, 0, tzinfo=BERLIN)),
        ("in 10 Minuten", datetime(2024, 5, 1, 14, 40, tzinfo=BERLIN)),
        ("in einer Stunde", datetime(2024, 5, 1, 15, 30, tzinfo=BERLIN)),
        ("demain à 8h", datetime(2024, 5, 2, 8, 0, tzinfo=BERLIN)),
        ("vendredi à 14h30", datetime(2024, 5, 3, 14, 30, tzinfo=BERLIN)),
        ("en 10 minutos", datetime(2024, 5, 1, 14, 40, tzinfo=BERLIN)),
        ("dans 15 minutes", datetime(2024, 5, 1, 14, 45, tzinfo=BERLIN)),
        ("en 15 minutes", datetime(2024, 5, 1, 14, 45, tzinfo=BERLIN)),
        ("mañana a las 9", datetime(2024, 5, 2, 9, 0, tzinfo=BERLIN)),
        ("heute abend", datetime(2024, 5, 1, 20, 0, tzinfo=BERLIN)),
    ],
)
def test_parse_when_reads_german_french_and_spanish(phrase: str, expected: datetime) -> None:
    assert parse_when(phrase, NOW) == expected


def test_a_deadline_in_a_german_email_is_found_and_english_is_left_alone() -> None:
    email = "Guten Morgen Jonas, kannst du mir bis Freitag die Unterlagen schicken? Viele Grüße, Petra"
    assert [day for _, day in find_dates(email, WEDNESDAY)] == [date(2024, 5, 3)]  # "Morgen" of the greeting is no date
    assert find_dates("I am free, please book the venue by Monday.", WEDNESDAY) == [("Monday", date(2024, 5, 6))]
    assert parse_repeat("täglich") == parse_repeat("tous les jours") == 86400
