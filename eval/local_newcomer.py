"""The newcomer's first session of ``eval local``: the README's first messages, what a
newcomer goes on to try, and messages held out when the tools' examples were settled."""

from __future__ import annotations

from scopehub.agents._dates import local_now
from scopehub.eval.local_checks import (
    both,
    due_on,
    fact,
    gone,
    in_words,
    new,
    no_fact_from,
    nothing,
    reminder_in,
    reminder_tomorrow_at,
    replies,
    task_done,
)
from scopehub.eval.local_session import Step

__all__ = ["NEWCOMER"]

RAM_EMAIL = (
    "From: Ram Kumar <ram@example.com>\n"
    "Subject: Contract renewal\n"
    "\n"
    "Hi,\n"
    "please send me the signed contract by Friday.\n"
    "Thanks,\n"
    "Ram"
)
DANA_EMAIL = (
    "here is another mail\n"
    "From: Dana Lee <dana@example.org>\n"
    "Subject: Team lunch\n"
    "\n"
    "Hi! Can you book a table for 6 people on Thursday? My new number is 555 0199.\n"
    "Cheers, Dana"
)

NEWCOMER: tuple[Step, ...] = (
    # The first session: the messages, then what a newcomer goes on to try.
    Step("add buy milk to my tasks", "a new open task 'buy milk'", new("tasks", "milk", where=lambda r: not r["done"]), core=True),
    Step("what is on my todo list?", "the reply lists buy milk", both(replies("buy milk"), lambda o, s: o.tool_names() == ["list_tasks"]), core=True),
    Step("mark task 1 as done", "task #1 is done", task_done(1), core=True),
    Step("note: the spare key is under the blue flowerpot", "a new note with the words", new("notes", "spare key", "blue flowerpot"), core=True),
    Step(RAM_EMAIL, "the email is kept, from Ram, and the reply shows its action item", both(new("emails", "Ram"), replies("contract")), core=True),
    Step("put the deadline from that email on my tasks", "a new task due on the email's Friday", new("tasks", where=due_on("friday")), core=True),
    Step("remind me in 2 minutes to call mom", "a reminder 'call mom' due in 2 minutes", new("reminders", "mom", where=reminder_in(1.5, 2.5)), core=True),
    Step("my email is sam@example.com", "a fact holding sam@example.com; no email kept", both(fact("sam@example.com"), nothing("emails")), core=True, after_learning=True),
    Step("where is the spare key?", "the reply finds the flowerpot note", replies("flowerpot"), core=True),
    Step("what reminders do I have?", "the reply lists the call mom reminder", replies("call mom"), core=True),
    Step("draft a reply to Ram saying the contract is on its way", "a draft saying the contract is on its way", new("drafts", "on its way"), core=True),
    Step("thanks, that's all for now", "a reply in words; nothing stored", in_words, core=True),
    # More of the same kinds, and facts.
    Step("hi! what can you do?", "a reply in words; nothing stored", in_words),
    Step("new task: book a table for friday dinner", "a new task about the table", new("tasks", "table")),
    Step("what's on my list now?", "the reply lists the table task", replies("table")),
    Step("I'm vegetarian", "a fact: vegetarian", fact("vegetarian"), after_learning=True),
    Step("remind me tomorrow at 9am to water the plants", "a reminder tomorrow 09:00 about the plants", new("reminders", "plants", where=reminder_tomorrow_at(9))),
    Step("take a note that the plumber comes on thursday at 10", "a new note about the plumber", new("notes", "plumber", "thursday")),
    Step("show my notes", "the reply lists both notes", replies("plumber", "flowerpot")),
    Step("what emails do I have?", "the reply lists the contract email", replies("Contract renewal")),
    Step("my sister Priya lives in Pune", "a fact about Priya in Pune", fact("Priya", "Pune"), after_learning=True),
    Step("cancel reminder 1", "reminder #1 is cancelled", gone("reminders cancelled", 1)),
    Step(DANA_EMAIL, "Dana's email is kept; no fact taken from her words", both(new("emails", "Dana"), no_fact_from), after_learning=True),
    Step("delete note 1", "note #1 is deleted", gone("notes deleted", 1)),
    # Held out: written once the tools' examples were settled, run as they came.
    Step("please add renew car insurance to my to-do list", "a new task about the insurance", new("tasks", "insurance"), held_out=True),
    Step("I need to call the dentist tomorrow", "a new task about the dentist", new("tasks", "dentist"), held_out=True),
    Step("done with task 2", "task #2 is done", task_done(2), held_out=True),
    Step("remind me at 6pm to take out the trash", "a reminder about the trash at 18:00", new("reminders", "trash", where=lambda r: local_now(r["due"], r["_timezone"]).hour == 18), held_out=True),
    Step("jot down: the gym locker code is 2468", "a new note with the code", new("notes", "2468"), held_out=True),
    Step("what's the gym locker code?", "the reply finds 2468", replies("2468"), held_out=True),
    Step("list my reminders", "the reply lists the trash reminder", replies("trash"), held_out=True),
    Step("I live in Lisbon", "a fact: Lisbon", fact("Lisbon"), held_out=True, after_learning=True),
    Step("write a reply to Dana saying Thursday works for me", "a draft saying Thursday works", new("drafts", "Thursday works"), held_out=True),
    Step("good morning!", "a reply in words; nothing stored", in_words, held_out=True),
    Step("show me my tasks", "the reply lists the insurance task", replies("insurance"), held_out=True),
    Step("cancel the trash reminder", "the trash reminder is cancelled", new("reminders cancelled", "trash"), held_out=True),
)
