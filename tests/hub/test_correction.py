"""Which next messages correct the reply before them, in every language the lexicon lists."""

from __future__ import annotations

import pytest

from scopehub.hub.routing.correction import is_correction

CORRECTIONS = [
    "no, I meant the work list",
    "no, it's Friday",
    "wrong, it's on Friday",
    "not that, the other one",
    "Nein, ich meinte die Arbeitsliste",
    "Ich meinte die Arbeitsliste",
    "Falsch, es ist am Freitag",
    "Non, je voulais dire la liste du travail",
    "Pas ça, l'autre liste",
    "C'est faux, c'est vendredi",
    "No, quise decir la lista del trabajo",
    "Me refería a la lista del trabajo",
    "Eso no, la otra lista",
    "No, intendevo la lista del lavoro",  # its function words read as Spanish
    "Não, eu quis dizer a lista do trabalho",
    "Nee, ik bedoelde de werklijst",
    "Нет, я имел в виду рабочий список",
    "Не то, другой список",
    "違う、仕事のリストです",
    "そうじゃなくて、仕事のリスト",
    "不对，我是说工作清单",
]

# Answers that open the same way: a polite "no", a "not now", a plain request.
ANSWERS = [
    "No, it's enough thanks",
    "no, thanks",
    "not now",
    "no milk this week, add bread",
    "Nein, danke",
    "Nein danke, das reicht",
    "Nicht heute",
    "Non merci",
    "Non, merci beaucoup",
    "Pas ce soir",
    "No, gracias",
    "No gracias, está bien",
    "No es necesario",
    "No, grazie",
    "Não, obrigado",
    "Nee, dank je",
    "Нет, спасибо",
    "いいえ、大丈夫です",
    "不用了，谢谢",
    "Was steht auf meiner Liste?",
    "¿Qué hay en mi lista?",
]


@pytest.mark.parametrize("text", CORRECTIONS)
def test_a_correction_is_recognised_in_its_language(text: str) -> None:
    assert is_correction(text)


@pytest.mark.parametrize("text", ANSWERS)
def test_an_answer_that_opens_the_same_way_is_not_a_correction(text: str) -> None:
    assert not is_correction(text)
