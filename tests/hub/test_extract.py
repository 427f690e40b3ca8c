"""Arguments read off the message without the model (hub.models.extract), and the planner
calling a tool with them: what would be stored."""

from __future__ import annotations

import pytest

from scopehub.agents import discover_agents
from scopehub.hub.app import teach_tools
from scopehub.hub.context.prompt import agent_prompt
from scopehub.hub.models.extract import action_items, free_text, item_numbers, moment_of
from scopehub.hub.models.planner import Call, Planner
from tests.hub.test_planner import Learner, conversation, tool_step


@pytest.fixture(scope="module")
def agents():
    return discover_agents()


@pytest.fixture(scope="module")
def planner(agents) -> Planner:
    learner = Learner()
    teach_tools(learner, agents)
    return learner.planner


def tools_of(agents, name):
    return list(agent_prompt(agents[name]).offered(True))


@pytest.mark.parametrize(
    ("agent", "text", "call"),
    [
        (
            "tasks",
            "can you add 'renew my passport' to my to-do list",
            Call("add_task", {"title": "renew my passport"}),
        ),
        (
            "tasks",
            "new task: call the plumber tomorrow",
            Call("add_task", {"title": "call the plumber", "due": "tomorrow"}),
        ),
        (
            "tasks",
            "add fix the bike for saturday",
            Call("add_task", {"title": "fix the bike", "due": "saturday"}),
        ),
        (
            "tasks",
            "I have to pay the rent, add it as a task",
            Call("add_task", {"title": "pay the rent"}),
        ),
        ("tasks", "Füge Brot zu meiner Einkaufsliste hinzu", Call("add_task", {"title": "Brot"})),
        (
            "notes",
            "jot this down: wifi password at the cabin is pinecone77",
            Call("save_note", {"text": "wifi password at the cabin is pinecone77"}),
        ),
        (
            "reminders",
            "remind me in 20 minutes to check the laundry",
            Call("set_reminder", {"when": "in 20 minutes", "text": "check the laundry"}),
        ),
        ("tasks", "Ich muss noch die Garage aufräumen", Call("add_task", {"title": "die Garage aufräumen"})),
        # A team addressed, and what to pass on, in four languages.
        (
            "general",
            "let the finance team know my bank details changed",
            Call("dispatch", {"to": "finance", "subject": "my bank details changed", "body": "my bank details changed"}),
        ),
        (
            "general",
            "Gib der Buchhaltung Bescheid, dass die Rechnung bezahlt ist",
            Call("dispatch", {"to": "buchhaltung", "subject": "die Rechnung bezahlt ist", "body": "die Rechnung bezahlt ist"}),
        ),
        (
            "general",
            "Préviens l'équipe logistique que le camion est en retard",
            Call("dispatch", {"to": "logistique", "subject": "le camion est en retard", "body": "le camion est en retard"}),
        ),
        (
            "general",
            "Avisa al equipo de logística de que falta una caja",
            Call("dispatch", {"to": "logistica", "subject": "falta una caja", "body": "falta una caja"}),
        ),
        (
            "reminders",
            "Recuérdame mañana a las 9 llamar al médico",
            Call("set_reminder", {"when": "tomorrow at 9:00", "text": "llamar al médico"}),
        ),
        # A polite opening is no part of the request: the verb after it decides.
        ("tasks", "Bitte füg Winterreifen aufziehen zu meinen Aufgaben hinzu", Call("add_task", {"title": "Winterreifen aufziehen"})),
        ("tasks", "Merci d'ajouter acheter des timbres à mes tâches", Call("add_task", {"title": "acheter des timbres"})),
        ("tasks", "Por favor, añade pedir cita con el médico a mis tareas", Call("add_task", {"title": "pedir cita con el médico"})),
        ("reminders", "Bitte erinnere mich morgen um 8 an den Keller", Call("set_reminder", {"when": "tomorrow at 8:00", "text": "den Keller"})),
        ("reminders", "Merci de me rappeler demain à 8h d'appeler maman", Call("set_reminder", {"when": "tomorrow at 8:00", "text": "appeler maman"})),
        # A moment from now, in four languages: the reminder's time, not the model's guess.
        ("reminders", "Rappelle-moi dans 15 minutes de sortir le linge", Call("set_reminder", {"when": "in 15 minutes", "text": "sortir le linge"})),
        ("reminders", "Erinnere mich in 15 Minuten an die Wäsche", Call("set_reminder", {"when": "in 15 minutes", "text": "die Wäsche"})),
        ("reminders", "Recuérdame en 15 minutos sacar la basura", Call("set_reminder", {"when": "in 15 minutes", "text": "sacar la basura"})),
        ("reminders", "remind me in 15 minutes to check the oven", Call("set_reminder", {"when": "in 15 minutes", "text": "check the oven"})),
    ],
)
def test_arguments_are_read_off_the_message_with_no_model_call(planner, agents, agent, text, call):
    assert planner.plan(conversation(("user", text)), tools_of(agents, agent)) == call


def test_the_last_reply_is_not_copied_into_a_note_that_says_its_own_words(planner, agents):
    messages = conversation(
        ("user", "add renew my passport"),
        ("assistant", "Added #1 renew my passport"),
        ("user", "jot this down: the gate code is 4711"),
    )
    assert planner.plan(messages, tools_of(agents, "notes")) == Call(
        "save_note", {"text": "the gate code is 4711"}
    )


def test_a_reply_with_a_time_in_it_still_looks_the_email_up_and_takes_the_words_after_that(
    planner, agents
):
    message = conversation(("user", "reply to Tom that Saturday at 7 works great"))
    assert planner.plan(message, tools_of(agents, "inbox")) == Call("list_emails", {})
    listing = "#2 2024-03-04 Tom Berg <tom@berg.example>: Dinner on Saturday\n#1 2024-03-04 Lena Fischer <lena@fischer.example>: Quarterly report"
    step = planner.plan(message + tool_step("list_emails", {}, listing), tools_of(agents, "inbox"))
    assert step == Call("draft_reply", {"body": "Saturday at 7 works great", "email_id": 2})


def test_the_thing_a_person_asked_for_is_their_emails_request_and_day(planner, agents):
    kept = (
        "Kept email #1.\nFrom: Lena Fischer <lena@fischer.example>\nSubject: Quarterly report\nDates: Thursday = Thu 2026-12-03\n"
        "Action items:\n- could you send me the quarterly figures by Thursday?"
    )
    messages = conversation(
        ("user", "From: Lena ..."),
        ("assistant", kept),
        ("user", "add the thing Lena asked for to my tasks"),
    )
    assert planner.plan(messages, tools_of(agents, "tasks")) == Call(
        "add_task", {"due": "Thursday", "title": "send Lena the quarterly figures"}
    )


def test_the_pieces():
    assert free_text("take a note: Anna's party is at 8pm") == "Anna's party is at 8pm"
    assert (
        item_numbers("move task 4 to tomorrow") == [4] and item_numbers("Saturday at 7 works") == []
    )
    assert moment_of("remind me every monday at 9 to water the plants") == (
        None,
        "remind me every monday at 9 to water the plants",
    )
    assert action_items("Kept email #3.\nAction items:\n- Please book the venue by Monday.") == [
        "book the venue by Monday"
    ]


def test_the_kind_of_item_a_number_names():
    from scopehub.hub.models.extract import item_nouns

    assert item_nouns("Zeig Notiz 3") == {"note"}
    assert item_nouns("Efface la note 2 et la tâche 4") == {"note", "task"}
    assert item_nouns("show email number 3") is None  # "number 3": of no stated kind
    assert item_nouns("Saturday at 7 works") == set()


def test_a_request_that_opens_with_a_verb_of_keeping():
    from scopehub.hub.models.extract import opens_keeping

    assert opens_keeping("can you add whatever is still open")
    assert opens_keeping("please put the receipts on my list")
    assert opens_keeping("Apunta que el fontanero viene el lunes")
    assert not opens_keeping("what is still open?")
    assert not opens_keeping("the shop has added a new till")  # not at the opening


def test_one_item_or_items_of_a_kind():
    from scopehub.hub.models.extract import items_said

    assert items_said("what did the last email say") == ({"email"}, set())
    assert items_said("Zeig mir die E-Mail von der Bank") == ({"email"}, set())
    assert items_said("Lis la note sur le wifi") == ({"note"}, set())
    assert items_said("Affiche mes notes") == (set(), {"note"})
    assert items_said("Muéstrame mis tareas y mis recordatorios") == (set(), {"task", "reminder"})
    assert items_said("what did I note so far") == (set(), set())  # "note" the verb
    assert items_said("what did Anna's email say about the venue?") == (set(), set())  # whose, not which one


def test_the_team_a_message_addresses_and_what_to_pass_on():
    from scopehub.hub.models.extract import team_of

    assert team_of("ask the marketing team to send me the photos") == ("marketing", "send me the photos")
    assert team_of("send this to the design team: the logo is approved") == ("design", "the logo is approved")
    assert team_of("Sag dem Vertriebsteam, dass die Messe ausfällt") == ("vertrieb", "die Messe ausfällt")
    assert team_of("the server is down, tell the ops team") == ("ops", "the server is down")
    assert team_of("add buy milk to my list") is None
    # A department named without "team", and nothing said besides it: what came before is passed on.
    assert team_of("pass it on to accounting") == ("accounting", "")
    assert team_of("Leite das an die Buchhaltung weiter") == ("buchhaltung", "")
    assert team_of("Pásaselo al equipo de contabilidad") == ("contabilidad", "")
    assert team_of("Avisa a soporte de que el portátil no enciende") == ("soporte", "el portátil no enciende")
    assert team_of("send it to me") is None


def test_a_dispatch_that_says_only_the_team_passes_on_the_email_it_follows():
    from scopehub.hub.models.extract import addressed_arguments

    function = {
        "name": "dispatch",
        "parameters": {"type": "object", "properties": {"to": {"type": "string"}, "body": {"type": "string"}}, "required": ["to", "body"]},
    }
    kept = "Kept email #1.\nFrom: Brightline <b@x.example>\nSubject: Invoice 2291\nAction items:\n- pay 412.50 EUR by 20 December"
    assert addressed_arguments(function, "pass it on to accounting", kept) == {"to": "accounting", "body": "pay 412.50 EUR by 20 December"}
    assert addressed_arguments(function, "pass it on to accounting") == {"to": "accounting", "body": "pass it on to accounting"}


def test_that_after_an_email_was_read_out_is_the_request_of_that_email(planner, agents):
    kept = (
        "Kept email #1.\nFrom: Harbour Energy <billing@harbour.example>\nSubject: Meter reading\n"
        "Action items:\n- please send us your meter reading by Friday"
    )
    read = (
        "Email #1: Meter reading\nFrom: Harbour Energy <billing@harbour.example>\n\nDear customer,\n"
        "please send us your meter reading by Friday.\nKind regards"
    )
    messages = conversation(
        ("user", "From: Harbour Energy <billing@harbour.example>\nSubject: Meter reading\n\nDear customer,\nplease send us your meter reading by Friday."),
        ("assistant", kept),
        ("user", "what did the energy company want?"),
        ("assistant", read),
        ("user", "put that on my to-do list"),
    )
    step = planner.plan(messages, tools_of(agents, "tasks"))
    assert isinstance(step, Call) and step.name == "add_task"
    assert "meter reading" in step.arguments["title"] and str(step.arguments.get("due")).casefold() == "friday"


def test_that_after_a_question_about_a_kept_email_is_the_request_of_that_email(planner, agents):
    # The answer to "how much ...?" is the model's own words, no read email: the email kept
    # just before the question is what "that" points at, not the words "my tasks".
    kept = "Kept email #1.\nFrom: Dale Motors <service@dalemotors.example>\nSubject: MOT reminder\nAction items:\n- book the MOT before 12 December"
    messages = conversation(
        ("user", "From: Dale Motors <service@dalemotors.example>\nSubject: MOT reminder\n\nHello,\nplease book the MOT before 12 December. It costs 54.85 GBP."),
        ("assistant", kept),
        ("user", "how much will it cost?"),
        ("assistant", "It costs 54.85 GBP."),
        ("user", "put that on my tasks"),
    )
    step = planner.plan(messages, tools_of(agents, "tasks"))
    assert isinstance(step, Call) and step.name == "add_task" and "MOT" in step.arguments["title"]


def test_a_request_that_says_nothing_of_what_it_is_about_keeps_the_emails_subject(planner, agents):
    kept = "Kept email #1.\nFrom: Dale Motors <service@dalemotors.example>\nSubject: MOT reminder\nAction items:\n- Book online or give us a call"
    messages = conversation(("user", "From: Dale Motors ..."), ("assistant", kept), ("user", "how much will it cost?"), ("assistant", "54.85 GBP."), ("user", "put that on my tasks"))
    assert planner.plan(messages, tools_of(agents, "tasks")) == Call("add_task", {"title": "MOT reminder: Book online or give us a call"})


@pytest.mark.parametrize(
    "text", ["Können Sie Brot zu meinen Aufgaben hinzufügen?", "Könnten Sie bitte Brot zu meiner Liste hinzufügen?"]
)
def test_a_formal_german_request_adds_the_item_without_the_sie(planner, agents, text):
    # "Können Sie ...?" asks for something to be done; "Sie" is the bot, not part of the task.
    step = planner.plan(conversation(("user", text)), tools_of(agents, "tasks"))
    assert step == Call("add_task", {"title": "Brot"})
    assert "Sie" not in step.arguments["title"].split()
