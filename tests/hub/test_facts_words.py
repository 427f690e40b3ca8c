"""Facts learnt only from the person's own words, learning's timing around the reply, and the extractor's call record."""

from __future__ import annotations

import asyncio
import json

import pytest

from scopehub.hub import Inbound
from scopehub.hub.errors import ModelUnavailable
from scopehub.hub.facts import (
    FactKeeper,
    infer_key,
    looks_factual,
)
from scopehub.hub.models.testing import ScriptedModel
from scopehub.memory import NewMessage, Store, current_facts, fact_history
from tests.hub.facts_helpers import (
    EMAIL_OLD,
    SCOPE,
    extraction,
    make_hub,
    run_learning,
    seed,
    texts,
)

# --------------------------------------------------------------------------- the person's own words


RAM_MAIL = "From: Ram Kumar <ram@example.com>\nSubject: Contract\n\nHi, please update your address to the new one.\nRam"


@pytest.mark.parametrize(
    ("message", "invented"),
    [
        ("I'm allergic to peanuts", {"text": "The user's name is Sam.", "key": "user.name"}),
        ("I work at Acme as a designer", {"text": "User is a freelance designer specializing in creative services"}),
        ("my email is sam@example.com", {"text": "User's email is sam@example.org", "key": "user.email"}),
        ("my phone is 555 0100", {"text": "User's phone is 555 0199", "key": "user.phone"}),
        ("Priya lives in Pune", {"text": "Ravi lives in Pune", "key": "ravi.home"}),
    ],
)
def test_a_fact_the_extractor_invents_is_never_stored(tmp_path, message, invented):
    with Store(tmp_path / "facts.db") as store:
        run_learning(store, message, extraction(invented))
        assert all(invented["text"] != fact.text for fact in fact_history(store, SCOPE))


def test_invented_candidates_are_dropped_and_true_ones_kept(tmp_path):
    with Store(tmp_path / "facts.db") as store:
        run_learning(
            store,
            "by the way, my phone number is 555 0100",
            extraction(
                {"text": "User's phone number is 555-0100", "key": "user.phone"},  # other punctuation, same digits
                {"text": "User is vegetarian", "key": "user.diet"},  # said nowhere
            ),
        )
        assert texts(current_facts(store, SCOPE)) == {"User's phone number is 555-0100"}


def test_when_every_candidate_is_invented_the_persons_own_sentence_is_kept(tmp_path):
    with Store(tmp_path / "facts.db") as store:
        seed(store, ("User's email is sam@example.com", "user.email", "derived"))
        # A small model copies a known fact and garbles the new one.
        run_learning(store, "I'm vegetarian", extraction({"text": "user.email: sam@example.com"}, {"text": "User is vegan", "key": "user.diet"}))
        kept = {fact.key: fact.text for fact in current_facts(store, SCOPE)}
        assert kept == {"user.email": "User's email is sam@example.com", "user.diet": "I'm vegetarian"}


def test_a_pasted_email_is_not_the_persons_words_and_costs_no_model_call(tmp_path):
    with Store(tmp_path / "facts.db") as store:
        extractor = ScriptedModel()  # raises if called
        keeper = FactKeeper(store, extractor)
        for text in (RAM_MAIL, "> my email is quoted@example.com\nthanks"):
            message = store.append(NewMessage(scope=SCOPE, role="user", text=text))
            assert asyncio.run(keeper.learn_from(SCOPE, message)) == []
        assert extractor.calls == [] and current_facts(store, SCOPE) == []


def test_the_extractor_sees_only_what_the_person_wrote_around_a_pasted_email(tmp_path):
    with Store(tmp_path / "facts.db") as store:
        _, extractor = run_learning(store, f"my new number is 555 0100, and here is Ram's mail:\n{RAM_MAIL}", extraction())
        user = extractor.calls[0].messages[-1]["content"]
        assert "555 0100" in user and "ram@example.com" not in user and "update your address" not in user


def test_a_request_is_never_kept_as_the_persons_own_fact(tmp_path):
    with Store(tmp_path / "facts.db") as store:
        run_learning(store, "write a reply to Dana saying Thursday works for me", extraction({"text": "Dana is a vegan", "key": "dana.diet"}))
        assert current_facts(store, SCOPE) == []
    assert infer_key("Thursday works for me")[0] is None


def test_the_pre_filter_lets_through_what_the_key_reader_understands():
    assert looks_factual("my sister Priya lives in Pune")
    assert looks_factual("my brother Tom works at Acme")


def test_learning_gives_way_to_the_next_message_and_is_done_after_it(tmp_path):
    """Any model: extraction in flight when the next message of the scope arrives is cancelled,
    that message is answered, and the extraction runs again afterwards; nothing is lost."""
    from scopehub.hub.models.testing import FunctionModel

    attempts: list[str] = []
    cancelled: list[bool] = []

    async def extractor(messages, tools):
        attempts.append(messages[-1]["content"])
        if len(attempts) == 1:
            try:
                await asyncio.Event().wait()  # still thinking when the next message arrives
            except asyncio.CancelledError:
                cancelled.append(True)
                raise
        return extraction({"text": "User's email is sam@example.com", "key": "user.email"})

    hub = make_hub(tmp_path, extractor=FunctionModel(extractor))

    async def session():
        first = await hub.handle(Inbound(scope=SCOPE, text="my email is sam@example.com"))
        hub.schedule_after_send(first)
        while not attempts:
            await asyncio.sleep(0)
        second = await hub.handle(Inbound(scope=SCOPE, text="hi"))
        hub.schedule_after_send(second)
        await hub.drain()
        return second

    assert asyncio.run(session()).text == "ok"
    assert cancelled == [True] and len(attempts) == 2
    # The person's own sentence was kept before the first reply (the next message knew it);
    # the extraction that ran again found the same fact and kept it as it was.
    assert texts(current_facts(hub.store, SCOPE)) == {"my email is sam@example.com"}


def test_a_fact_stated_in_words_the_key_reader_knows_is_kept_before_the_reply(tmp_path):
    """However quickly the next message comes, it knows the fact: no model call was needed."""
    hub, seen = _hub_showing_system_prompts(tmp_path)

    async def session():
        first = await hub.handle(Inbound(scope=SCOPE, text="my phone number is 555 0142"))
        # No schedule_after_send: the background extraction never ran when the next message comes.
        second = await hub.handle(Inbound(scope=SCOPE, text="what is my phone number?"))
        return first, second

    asyncio.run(session())
    assert any(fact.key == "user.phone" and "555 0142" in fact.text for fact in current_facts(hub.store, SCOPE))
    assert "555 0142" in seen[-1]  # the second call's facts block has it


# --------------------------------------------------------------------------- the extractor's call record


def test_the_extractor_call_record_keeps_its_prompt_answer_and_what_became_of_each_fact(tmp_path):
    """The console's extractor page: what the extractor was sent, what it answered, which
    facts it proposed, which were refused (not in the person's words) and what was decided."""
    store = Store(tmp_path / "hub.db")
    seed(store, EMAIL_OLD)
    answer = json.dumps(
        {"facts": [
            {"text": "User's email is new@example.com", "key": "user.email", "op": "update"},
            {"text": "User lives in Paris", "key": "user.city", "op": "add"},  # never said
        ]}
    )  # fmt: skip
    decisions, extractor = run_learning(store, "my email is new@example.com now", answer)
    (call,) = [c for c in store.calls(SCOPE) if c["via"] == "extractor"]
    extra = json.loads(call["extra"])
    sent = extractor.calls[0].messages
    assert extra["prompt"]["user"] == sent[1]["content"] and "old@example.com" in extra["prompt"]["user"]
    from scopehub.hub.context.record import text_digest

    assert extra["prompt"]["system_sha"] == text_digest(sent[0]["content"])
    assert extra["answer"] == answer
    assert [p["text"] for p in extra["proposed"]] == ["User's email is new@example.com", "User lives in Paris"]
    assert [(r["text"], r["reason"]) for r in extra["refused"]] == [("User lives in Paris", "not in the person's own words")]
    assert [(d["op"], d["key"]) for d in extra["decisions"]] == [("update", "user.email")] == [(d.op.value, d.fact.key) for d in decisions]
    assert call["ok"] == 1 and call["error_class"] is None


def test_a_failed_extractor_call_is_recorded_with_its_reason(tmp_path):
    store = Store(tmp_path / "hub.db")
    decisions, _ = run_learning(store, "my email is new@example.com", ModelUnavailable("provider returned 503 for key sk-live-0123456789abcdef"))
    assert decisions == []
    (call,) = store.calls(SCOPE)
    assert (call["via"], call["ok"], call["error_class"]) == ("extractor", 0, "ModelUnavailable")
    assert call["error_message"] == "provider returned 503 for key [redacted]"
    assert json.loads(call["extra"])["proposed"] == []
    assert run_learning(store, "my email is other@example.com", "sure! here you go")[0] == []
    last = store.calls(SCOPE)[-1]
    assert (last["ok"], last["error_class"], json.loads(last["extra"])["answer"]) == (0, "UnusableAnswer", "sure! here you go")


@pytest.mark.parametrize(
    ("said", "asked", "key", "value"),
    [
        ("Ich wohne seit drei Jahren in Köln", "wo wohne ich?", "user.home", "Köln"),
        ("Ich arbeite bei Bosch", "bei wem arbeite ich?", "user.employer", "Bosch"),
        ("J'habite à Lille", "j'habite où ?", "user.home", "Lille"),
        ("Mon frère s'appelle Hugo", "comment s'appelle mon frère ?", "user.frere", "Hugo"),
        ("Vivo en Valencia", "¿dónde vivo?", "user.home", "Valencia"),
        ("Mi hija se llama Nora", "¿cómo se llama mi hija?", "user.hija", "Nora"),
    ],
)
def test_a_fact_stated_in_german_french_or_spanish_is_kept_and_known_when_asked_back(tmp_path, said, asked, key, value):
    """What someone says about themselves in their own language is a fact the next message knows."""
    hub, seen = _hub_showing_system_prompts(tmp_path)

    async def session():
        await hub.handle(Inbound(scope=SCOPE, text=said))
        await hub.handle(Inbound(scope=SCOPE, text=asked))

    asyncio.run(session())
    assert [(fact.key, value in fact.text) for fact in current_facts(hub.store, SCOPE)] == [(key, True)]
    assert value in seen[-1]  # the question's facts block has it


def test_a_german_sentence_with_in_is_not_read_as_english():
    from scopehub.hub.routing.lexicon import language_of

    assert language_of("Ich wohne in Köln") == "de"
    assert language_of("Ich arbeite in Hamburg") == "de"
    assert language_of("put it in an envelope") == "en"


def _hub_showing_system_prompts(tmp_path):
    """A hub whose agent answers "ok" and keeps each call's system prompts (facts included)."""
    from scopehub.hub.models.testing import FunctionModel

    seen: list[str] = []

    def agent(messages, tools):
        seen.append(" ".join(str(m.get("content")) for m in messages if m.get("role") == "system"))
        return "ok"

    return make_hub(tmp_path, agent=FunctionModel(agent)), seen


def test_a_thing_of_ones_own_named_with_de_is_a_statement_about_oneself_in_french_and_spanish():
    from scopehub.hub.facts.keys import own_key_i18n

    assert own_key_i18n("Mi número de teléfono es 612 345 678") == "numero"
    assert own_key_i18n("Mon numéro de téléphone est le 06 12 34 56 78") == "numero"
    assert own_key_i18n("Mi hermana se llama Lucía") == "hermana"


@pytest.mark.parametrize(
    ("text", "key"),
    [("I bank with Corvell", "user.bank"), ("I shop at Greenmart", "user.shop"), ("we're insured with Halvo", "we.insurer"), ("I'm registered with Dr Osei", "user.registered_with")],
)
def test_whom_one_banks_shops_or_is_insured_with_is_a_fact_of_ones_own(text, key):
    from scopehub.hub.facts.keys import looks_factual

    assert looks_factual(text) and infer_key(text)[0] == key
    assert infer_key("I met with Sarah at noon")[0] is None


@pytest.mark.parametrize(("text", "said"), [("btw my flat is number 9", "my flat is number 9"), ("Au fait, j'habite au 3 rue Pasteur", "j'habite au 3 rue Pasteur")])
def test_a_fact_told_in_passing_is_learnt_before_the_reply_without_the_words_that_say_so(text, said):
    from scopehub.hub.facts.service import _IN_PASSING, _SPEAKER_FIRST

    assert _SPEAKER_FIRST.match(text) and _IN_PASSING.sub("", text) == said


def test_a_french_address_of_ones_own_is_worth_a_look():
    from scopehub.hub.facts.keys import looks_factual

    assert looks_factual("J'habite au 12 rue Victor Hugo") and infer_key("J'habite au 12 rue Victor Hugo")[0] == "user.home"


def test_a_candidate_that_stops_at_its_verb_states_nothing_and_is_refused():
    from scopehub.hub.facts.grounding import grounded

    assert not grounded("The user's email is", "user.email", "I bank with Corvell")
    assert not grounded("User lives in", "user.home", "I live in Leeds")
    assert grounded("User banks with Corvell", "user.bank", "I bank with Corvell")
