"""The routing cascade: explicit → reply → local (sticky) → LLM router with fallbacks."""

from __future__ import annotations

import asyncio

import pytest

from scopehub.hub.errors import RouterError
from scopehub.hub.models import ModelResponse
from scopehub.hub.models.testing import ScriptedModel
from scopehub.hub.routing import AgentProfile, LocalClassifier, Route, route
from scopehub.hub.routing.llm_router import ask_router, parse_router_answer
from tests.helpers import msg

PROFILES = [
    AgentProfile("general", "Small talk, help, anything else.", ("hi there", "how are you", "tell me a joke")),
    AgentProfile(
        "tasks",
        "To-do list: add, list, complete and edit tasks with due dates.",
        ("add buy milk to my tasks", "what is on my todo list", "mark the report task as done", "remind me to call mom is a task"),
        ("task", "todo"),
    ),
    AgentProfile(
        "inbox",
        "Emails the person pastes or forwards: keep them, extract sender, subject, deadlines, draft replies.",
        ("here is an email from my boss", "draft a reply to this mail", "summarise this email"),
        ("email", "mail", "inbox"),
    ),
    AgentProfile(
        "restaurant",
        "Find and book restaurants: cuisine, area, price range, table reservations.",
        ("book a table for two tonight", "find a cheap italian restaurant in the centre", "I want to eat somewhere nice"),
        ("restaurant", "table"),
    ),
    AgentProfile(
        "taxi",
        "Book taxis: pickup, destination, time.",
        ("I need a taxi at 5pm", "book me a cab to the station", "get me a car to the airport"),
        ("taxi", "cab"),
    ),
]
CLASSIFIER = LocalClassifier(PROFILES)


def test_explicit_slash_command_and_mention_win_and_strip_the_address():
    assert route("/inbox what did Ram write?", classifier=CLASSIFIER) .agent == "inbox"
    decision = route("/tasks@hub_bot list", classifier=CLASSIFIER)
    assert (decision.agent, decision.via, decision.text) == ("tasks", "explicit", "list")
    mention = route("hey @taxi get me home", classifier=CLASSIFIER)
    assert (mention.agent, mention.via, mention.text) == ("taxi", "explicit", "hey get me home")
    # an unknown /word is not an address
    assert route("/nonsense add milk to my todo list", classifier=CLASSIFIER).via != "explicit"


def test_a_reply_to_an_agents_message_goes_to_that_agent():
    replied = msg(7, "inbox", "Draft ready: ...", role="agent")
    decision = route("add milk to my todo list", classifier=CLASSIFIER, reply_to=replied)
    assert (decision.agent, decision.via) == ("inbox", "reply")
    # a reply to a person's message is no address
    assert route("add milk to my todo list", classifier=CLASSIFIER, reply_to=msg(6, "inbox")).agent == "tasks"


def test_local_classifier_routes_by_description_and_examples():
    assert route("find me an italian restaurant in the centre", classifier=CLASSIFIER).agent == "restaurant"
    assert route("I need a cab to the airport at 6", classifier=CLASSIFIER).agent == "taxi"
    assert route("add call the bank to my tasks", classifier=CLASSIFIER).agent == "tasks"
    first = route("hello, how are you?", classifier=CLASSIFIER)
    assert first.agent == "general"


@pytest.mark.parametrize("follow_up", ["yes please", "book it", "thanks", "yes, at 7pm", "sounds good, for 4 people"])
def test_short_follow_ups_stay_with_the_current_agent(follow_up):
    window = [msg(1, "restaurant", "find a cheap italian restaurant"), msg(2, "restaurant", "Pizza Hut is cheap. Book it?", role="agent")]
    decision = route(follow_up, classifier=CLASSIFIER, window=window)
    assert decision.agent == "restaurant"
    assert decision.via == "sticky"


def test_a_clear_new_request_switches_agent():
    window = [msg(1, "restaurant", "find a cheap italian restaurant"), msg(2, "restaurant", "Booked.", role="agent")]
    assert route("now I need a taxi to the station", classifier=CLASSIFIER, window=window).agent == "taxi"


def test_also_sees_names_the_agent_whose_content_is_referenced():
    window = [
        msg(1, "inbox", "here is an email from Ram: the Q3 report deadline is Friday 12 May"),
        msg(2, "inbox", "Saved the email from Ram.", role="agent"),
        msg(3, "general", "thanks"),
        msg(4, "general", "You're welcome!", role="agent"),
        msg(5, "general", "how are you"),
        msg(6, "general", "Fine!", role="agent"),
    ]
    decision = route("put the deadline from that email on my tasks", classifier=CLASSIFIER, window=window, tail=2)
    assert decision.agent == "tasks"
    assert decision.also_sees == ("inbox",)
    taxi = route("book a taxi to the restaurant", classifier=CLASSIFIER, window=[msg(1, "restaurant", "book pizza hut fenditton for 2")])
    assert (taxi.agent, taxi.also_sees) == ("taxi", ("restaurant",))
    # no reference, no also_sees
    assert route("add buy milk to my tasks", classifier=CLASSIFIER, window=window, tail=2).also_sees == ()


def test_default_also_sees_of_an_agent_is_merged():
    decision = route("add buy milk to my tasks", classifier=CLASSIFIER, default_also_sees={"tasks": ("inbox",)})
    assert decision.also_sees == ("inbox",)


def test_router_never_crashes_on_odd_text():
    for text in ["", "   ", "🙂🙂", "/", "@", "/tasks", "@@tasks", "東京で寿司", "x" * 20_000, "AND OR NOT ( \" *"]:
        decision = route(text, classifier=CLASSIFIER, window=[msg(1, "taxi")])
        assert decision.agent in CLASSIFIER.agents


# -- the LLM router stage ------------------------------------------------------------


def llm_route(text, **options):
    """The router's answer for ``text``: (route, prompt tokens, completion tokens); RouterError when unusable."""
    call = asyncio.run(ask_router(text, profiles=PROFILES, **options))
    if call.route is None:
        raise call.error
    return call.route, call.prompt_tokens, call.completion_tokens


def run_llm(model, window=()):
    return llm_route("book a taxi to the restaurant", model=model, window=list(window), timeout=1.0)


def test_llm_router_answer_is_validated_and_used():
    model = ScriptedModel([ModelResponse(content='{"agent": "taxi", "also_sees": ["restaurant", "nobody", "taxi"]}', prompt_tokens=90, completion_tokens=12)])
    decision, prompt_tokens, completion_tokens = run_llm(model, [msg(1, "restaurant", "book pizza hut")])
    assert (decision.agent, decision.also_sees, decision.via) == ("taxi", ("restaurant",), "llm")
    assert (prompt_tokens, completion_tokens) == (90, 12)
    sent = model.calls[0]
    assert sent.json_mode
    assert "[restaurant] user: book pizza hut" in sent.messages[-1]["content"]


@pytest.mark.parametrize(
    "step",
    [
        "not json at all",
        '{"agent": "plumber"}',
        '{"also_sees": []}',
        '{"agent": 5}',
        "",
        TimeoutError(),
        RuntimeError("provider exploded"),
    ],
)
def test_llm_router_failures_raise_router_error(step):
    with pytest.raises(RouterError):
        run_llm(ScriptedModel([step]))


def test_llm_router_times_out():
    async def slow(messages, tools):
        await asyncio.sleep(5)
        return '{"agent": "taxi"}'

    with pytest.raises(RouterError):
        llm_route("x", model=ScriptedModel([slow]), window=[], timeout=0.05)


def test_router_answer_in_code_fences_is_accepted():
    answer = parse_router_answer('```json\n{"agent": "Inbox", "also_sees": ["tasks"]}\n```', [p.name for p in PROFILES])
    assert (answer.agent, answer.also_sees) == ("inbox", ["tasks"])


def test_every_router_request_is_heard_with_its_prompt_and_answer_failed_ones_too():
    """What the hub records for the console's router page: the prompt, the raw answer, the
    route it gave or why it could not be used (the local route stands then)."""
    from scopehub.hub.routing import refine_with_llm

    local = Route(agent="restaurant", via="local")
    heard = []
    steps = [ModelResponse(content='{"agent": "taxi"}', prompt_tokens=80, completion_tokens=6), "I think taxi?", RuntimeError("503 from provider")]
    model = ScriptedModel(list(steps))
    routes = [
        asyncio.run(refine_with_llm(local, "book a taxi", model=model, profiles=PROFILES, window=[msg(1, "restaurant", "pizza")], on_call=heard.append))
        for _ in steps
    ]
    assert [r.agent for r in routes] == ["taxi", "restaurant", "restaurant"]
    ok, unusable, down = heard
    assert ok.messages == model.calls[0].messages and "[restaurant] user: pizza" in ok.messages[-1]["content"]
    assert (ok.answer, ok.route.agent, ok.prompt_tokens, ok.completion_tokens, ok.error) == ('{"agent": "taxi"}', "taxi", 80, 6, None)
    assert (unusable.answer, unusable.route) == ("I think taxi?", None) and "not JSON" in str(unusable.error)
    assert down.answer is None and isinstance(down.cause, RuntimeError) and "503 from provider" in str(down.error)
