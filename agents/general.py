"""``general``: small talk, help, and the fallback when no specialist fits."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from ._spec import AgentSpec, ToolContext, tool

NAME = "general"


class DispatchArgs(BaseModel):
    to: str = Field(description="the outside team, e.g. ci")
    subject: str
    body: str
    priority: Literal["urgent", "normal", "low"] = "normal"


@tool(
    examples=(
        (
            "tell the ci team to rerun the nightly build",
            {"to": "ci", "subject": "rerun the nightly build", "body": "rerun the nightly build"},
        ),
        "send this to the web_ops team: update the pricing page",
        "hand this over to the qa team: test the new login",
        "dispatch to ci: the deploy failed at 2am",
        "ask the data team for last week's numbers",
        'let the support team know the app crashes on login',
        'forward this to the marketing team: the banner is wrong',
        'send the finance team a note that the invoice is paid',
        'notify the ops team that the server is down',
        'tell the design team the logo is approved',
        'ping the backend team that the API is slow',
        'let the sales team know the demo moved to Friday',
        'Sag dem Support-Team, dass die App abstürzt',
        "Dis à l'équipe marketing que la bannière est fausse",
        'Avisa al equipo de finanzas que la factura está pagada',
    ),
    keywords=('team', 'tell', 'send', 'forward', 'notify', 'hand', 'ask', 'let', 'dispatch'),
)
def dispatch(ctx: ToolContext, args: DispatchArgs) -> str:
    """Hand work to an outside team (a file in its Maildir outbox)."""
    write = ctx.extra.get("dispatch")
    if write is None:
        raise RuntimeError("dispatching to outside teams is not set up in this hub")
    # The event first, then the file, in one transaction: if the file cannot be written,
    # the event is rolled back; nothing claims a dispatch that does not exist.
    with ctx.transaction():
        path = write(args.to, sender=NAME, subject=args.subject, body=args.body, priority=args.priority, scope=ctx.scope)
        ctx.emit("dispatch.sent", {"team": args.to, "subject": args.subject, "priority": args.priority, "file": path.name}, agent=NAME)
    return f"Dispatched to {args.to}: {path.name}"


agent = AgentSpec(
    name=NAME,
    description="Small talk, help and questions about the bot, anything no specialist covers.",
    instructions=(
        "Answer friendly and short. You keep no lists yourself: for tasks, notes, emails and reminders "
        "suggest /tasks, /notes, /inbox or /reminders."
    ),
    examples=(
        "hi there",
        "good morning",
        "how are you",
        "what can you do",
        "help",
        "who are you",
        "tell me a joke",
        "thanks for your help",
        "what is the capital of France",
        "explain how photosynthesis works",
        "what did we talk about last week",
        "translate good night into Spanish",
        # Work for outside teams (the dispatch tool): the team named, and what to pass on.
        "tell the qa team that the login page is broken",
        "let the support team know the app crashes on start",
        "hand this over to the legal team: review the new contract",
        "notify the backend team that the database is slow",
        # The same requests in other languages: their words and character n-grams find
        # this agent when a message has no English in it (one per language; tests use others).
        "Guten Morgen! Wer bist du?",
        "Salut, qui es-tu ?",
        "Buenos días, ¿quién eres?",
        "Доброе утро! Кто ты?",
        "おはよう、あなたは誰？",
        "सुप्रभात, तुम कौन हो?",
        "صباح الخير، من أنت؟",
    ),
    keywords=(
        "help", "hello", "joke", "chat", "bot", "question",
        "hallo", "witz", "bonjour", "blague", "hola", "chiste", "привет", "анекдот", "こんにちは", "नमस्ते", "चुटकुला", "مرحبا", "نكتة",
    ),
    # The fallback answers "what's going on": it is shown what the specialists recorded.
    # fact.learned comes from the hub's fact keeper, not from a tool of this agent.
    interests=("fact.learned", "task.created", "note.saved", "email.received", "reminder.set"),
    collaborators=("tasks", "notes", "inbox", "reminders"),
    emits=("dispatch.sent",),
    tools=(dispatch,),
    # No `team` tool on the built-ins: its schema (~175 tokens) would be paid on every call;
    # they learn from feedback without it. A plugin that declares a channel gets it.
)
