"""The inbox agent: a pasted email is kept and its essentials extracted; drafts are never sent."""

from __future__ import annotations

import asyncio

from scopehub import memory
from scopehub.agents import discover_agents
from scopehub.agents.inbox import draft_reply, keep_email, list_emails, read_email
from scopehub.hub.models import ModelResponse, ToolCall
from scopehub.hub.models.testing import ScriptedModel
from scopehub.hub.orchestrator import Deps, Hub, Inbound
from scopehub.hub.settings import load_settings
from tests.agents.helpers import NOW, call, make_ctx

PASTED = """/inbox can you look at this one?

---------- Forwarded message ---------
From: Anna Schmidt <anna.schmidt@example.com>
Date: Mon, Apr 29, 2024 at 10:15 AM
Subject: Q2 report and offsite
To: Tom <tom@example.com>

Hi Tom,

Thanks for the draft. A few things before the board meeting on May 7:

- Please send me the final Q2 figures by Friday.
- Review the budget slides and add the marketing numbers.
- Can you book the room for the offsite on June 14?

I sat with Paul yesterday and he liked the new layout.

Best,
Anna
"""


def _paste(store: memory.Store, text: str = PASTED, scope: str = "user:1") -> int:
    return store.append(memory.NewMessage(scope=scope, role="user", text=text, ts=NOW)).id


def test_keep_email_reads_the_current_message_and_extracts(store: memory.Store) -> None:
    message_id = _paste(store)
    result = call(keep_email, make_ctx(store, message_id=message_id))
    assert result.splitlines() == [
        "Kept email #1.",
        "From: Anna Schmidt <anna.schmidt@example.com>",
        "Subject: Q2 report and offsite",
        "Sent: Mon 2024-04-29",
        # "Friday" in an email sent on Monday 29 April is that week's Friday.
        "Dates: May 7 = Tue 2024-05-07; Friday = Fri 2024-05-03; June 14 = Fri 2024-06-14",
        "Action items:",
        "- Please send me the final Q2 figures by Friday.",
        "- Review the budget slides and add the marketing numbers.",
        "- Can you book the room for the offsite on June 14?",
    ]
    item = memory.get_vault_item(store, "user:1", 1)
    assert item is not None and item.kind == "email" and item.title == "Q2 report and offsite"
    assert item.body.startswith("can you look at this one?")  # the /inbox address is not part of it
    assert "Please send me the final Q2 figures" in item.body
    assert item.meta["from"] == "Anna Schmidt <anna.schmidt@example.com>"
    assert item.meta["date"] == "2024-04-29"
    assert ["Friday", "2024-05-03"] in item.meta["dates"]
    assert item.source_message == message_id and item.agent == "inbox"


def test_keep_email_with_rfc_headers_passed_as_text(store: memory.Store) -> None:
    text = (
        "From: billing@power.example\nSubject: Invoice 2291\nDate: Tue, 30 Apr 2024 08:00:00 +0000\n\n"
        "Dear customer, your invoice of 84.20 EUR is due 2024-05-15.\nPay by bank transfer to the account below.\n"
    )
    result = call(keep_email, make_ctx(store), text=text)
    assert "From: billing@power.example" in result
    assert "Sent: Tue 2024-04-30" in result
    assert "2024-05-15 = Wed 2024-05-15" in result
    assert "- Pay by bank transfer to the account below." in result
    assert "- your invoice of 84.20 EUR is due 2024-05-15." in result  # the salutation is dropped


def test_list_read_and_draft_without_sending(store: memory.Store) -> None:
    ctx = make_ctx(store, message_id=_paste(store))
    call(keep_email, ctx)
    assert call(list_emails, ctx) == "#1 2024-04-29 Anna Schmidt <anna.schmidt@example.com>: Q2 report and offsite"
    assert "Please send me the final Q2 figures by Friday." in call(read_email, ctx, id=1)

    messages_before = store.count_messages()
    draft = call(draft_reply, ctx, email_id=1, body="Hi Anna, the figures follow on Friday. Tom")
    assert draft == (
        "Draft #1 saved (not sent).\nTo: Anna Schmidt <anna.schmidt@example.com>\n"
        "Subject: Re: Q2 report and offsite\n\nHi Anna, the figures follow on Friday. Tom"
    )
    saved = memory.vault_item_by_number(store, "user:1", "draft", 1)  # the first draft, whatever came before
    assert saved is not None and saved.kind == "draft" and saved.meta == {"reply_to": 1, "to": "Anna Schmidt <anna.schmidt@example.com>"}
    assert store.count_messages() == messages_before  # a draft is not a message: nothing went anywhere
    assert call(read_email, ctx, id=1).startswith("Email #1: Q2 report and offsite")  # not draft #1
    assert "Re:" not in call(list_emails, ctx)  # drafts are not listed as received emails


def test_unknown_email_ids(store: memory.Store) -> None:
    ctx = make_ctx(store)
    assert call(read_email, ctx, id=9) == "No email #9; call list_emails."
    assert call(draft_reply, ctx, email_id=9, body="x") == "No email #9; call list_emails."
    assert call(list_emails, ctx) == "No emails kept."


def test_through_the_hub_the_pasted_email_is_kept_and_a_draft_shown_not_sent(store: memory.Store) -> None:
    model = ScriptedModel(
        steps=[
            ModelResponse(tool_calls=(ToolCall("k", "keep_email", "{}"),)),
            ModelResponse(tool_calls=(ToolCall("d", "draft_reply", '{"email_id": 1, "body": "Hi Anna, figures on Friday."}'),)),
            "Anna wants the Q2 figures by Friday. Draft #1 is ready for you to send.",
        ]
    )
    hub = Hub(Deps(store=store, settings=load_settings(), model=model, clock=lambda: NOW), discover_agents())
    email = PASTED.split("\n", 1)[1]  # no /inbox: the router recognises an email
    reply = asyncio.run(hub.handle(Inbound(scope="user:1", text=email, chat="1")))

    assert reply.agent == "inbox"
    assert reply.text == "Anna wants the Q2 figures by Friday. Draft #1 is ready for you to send."
    kept = model.calls[1].messages[-1]["content"]
    assert "From: Anna Schmidt <anna.schmidt@example.com>" in kept and "- Please send me the final Q2 figures by Friday." in kept
    assert model.calls[2].messages[-1]["content"].startswith("Draft #1 saved (not sent).")
    assert [(i.kind, i.title) for i in memory.list_vault_items(store, "user:1")] == [
        ("draft", "Re: Q2 report and offsite"),
        ("email", "Q2 report and offsite"),
    ]
    assert [(m.role, m.agent) for m in store.messages("user:1")] == [("user", "inbox"), ("agent", "inbox")]


def test_a_request_in_german_french_or_spanish_is_an_action_item() -> None:
    # "Action items: none found" for "Por favor, envíe ..." left "Apúntalo" nothing to keep.
    from scopehub.agents.inbox import _actions

    assert _actions("Hola,\nla matrícula cuesta 90 euros. Por favor, envíe el formulario antes del lunes.") == ["Por favor, envíe el formulario antes del lunes."]
    assert _actions("Guten Tag,\nbitte überweisen Sie den Betrag bis Freitag.") == ["bitte überweisen Sie den Betrag bis Freitag."]
    assert _actions("Bonjour,\nle devis s'élève à 2400 euros. Merci de nous confirmer avant le 20 décembre.") == ["Merci de nous confirmer avant le 20 décembre."]
    assert _actions("Hola,\nel curso empieza en enero.") == []


def test_a_german_ordinal_date_does_not_cut_an_action_item() -> None:
    from scopehub.agents.inbox import _actions

    assert _actions("Bitte zahlen Sie bis Freitag, 12. Dezember, die Miete.") == ["Bitte zahlen Sie bis Freitag, 12. Dezember, die Miete."]


def test_german_french_and_spanish_headers_give_the_sender_and_subject() -> None:
    # "Von: ... / Betreff: ..." was kept as "(no subject)" and its reply went "To: (fill in)".
    from datetime import date

    from scopehub.agents.inbox import parse_email

    pasted = {
        "Von: Hausverwaltung Weber <info@hv-weber.example>\nBetreff: Heizungsablesung\n\nGuten Tag,\nam Montag wird abgelesen.": "Heizungsablesung",
        "De : Garage Petit <contact@garage-petit.example>\nObjet : Votre devis\n\nBonjour,\nle devis est prêt.\n\n-----Message d'origine-----\n> Bonjour": "Votre devis",
        "De: Colegio Luna <info@colegioluna.example>\nAsunto: Excursión\n\nHola,\nla excursión es el martes.": "Excursión",
    }
    for text, subject in pasted.items():
        parsed = parse_email(text, date(2026, 12, 8))
        assert parsed.subject == subject
        assert "@" in parsed.sender and parsed.sender.split("<")[1].startswith(("info@", "contact@"))
        assert "Betreff" not in parsed.body and "Asunto" not in parsed.body and "Objet" not in parsed.body
