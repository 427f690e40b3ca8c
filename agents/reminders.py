"""``reminders``: one-off and recurring reminders, persisted; the transport delivers them when due.

The agent only writes rows; delivery belongs to the transports, which call
``memory.due_reminders`` / ``memory.pending_reminders``, and :func:`record_delivery`
(``memory.mark_reminder_sent`` plus the ``reminder.fired`` event, in one transaction).
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta

from pydantic import BaseModel, Field

from scopehub import memory

from ._dates import format_datetime, local_now, parse_date, parse_repeat, parse_when
from ._spec import AgentSpec, ToolContext, tool

NAME = "reminders"
_EVERY_WEEKDAY_RE = re.compile(r"^\s*every\s+([a-z]+)\s*$", re.IGNORECASE)


def _zone_name(ctx: ToolContext) -> str:
    return ctx.extra.get("timezone", "UTC")


def _repeat_label(seconds: int | None) -> str:
    if not seconds:
        return "once"
    for unit, size in (("week", 604800), ("day", 86400), ("hour", 3600), ("minute", 60)):
        if seconds % size == 0:
            count = seconds // size
            return f"every {unit}" if count == 1 else f"every {count} {unit}s"
    return f"every {seconds} seconds"


def _line(ctx: ToolContext, reminder: memory.Reminder) -> str:
    when = format_datetime(local_now(reminder.due, _zone_name(ctx)))
    return f"#{reminder.id} {when} {reminder.text} ({_repeat_label(reminder.every_seconds)})"


def _align_weekday(moment: datetime, repeat: str | None) -> datetime:
    """'every monday' with a 'when' on another day starts on the next Monday at that time."""
    match = _EVERY_WEEKDAY_RE.match(repeat or "")
    if not match:
        return moment
    target = parse_date(match[1], moment.date() - timedelta(days=1))  # today counts
    if target is None:
        return moment
    return moment.replace(year=target.year, month=target.month, day=target.day)


def record_delivery(store: memory.Store, scope: str, reminder_id: int, now: float) -> memory.Reminder | None:
    """Record that a reminder was delivered: mark it sent and emit ``reminder.fired``, together.

    For transports, in place of ``memory.mark_reminder_sent``; returns the updated
    reminder (None when unknown, and then nothing is recorded).
    """
    with store.transaction():
        delivered = memory.get_reminder(store, scope, reminder_id)
        updated = memory.mark_reminder_sent(store, scope, reminder_id, now)
        if delivered is not None:
            payload = {"reminder_id": delivered.id, "text": delivered.text}
            memory.emit_event(store, delivered.scope, NAME, "reminder.fired", payload, now=now)
    return updated


class SetReminderArgs(BaseModel):
    text: str = Field(description="what to remind of")
    when: str = Field(description="ISO datetime or words: in 10 minutes, tomorrow 9am, at 18:00")
    repeat: str = Field("none", description="none, hourly, daily, weekly or every N minutes/hours/days")


class NoArgs(BaseModel):
    pass


class ReminderIdArgs(BaseModel):
    id: int


# Example utterances per tool: the embedded model picks its tool from them, and the ones
# with arguments are the demonstrations it writes arguments from (hosted models never see them).
@tool(
    examples=(
        ("remind me to call mom in 10 minutes", {"text": "call mom", "when": "in 10 minutes"}),
        ("remind me tomorrow at 9am to take the bins out", {"text": "take the bins out", "when": "tomorrow at 9am"}),
        ("set a reminder for 18:00 to leave for the station", {"text": "leave for the station", "when": "18:00"}),
        ("ping me in 2 hours to check the oven", {"text": "check the oven", "when": "in 2 hours"}),
        "remind me every day at 8 to take my pills",
        "don't let me forget to water the plants on friday",
        "wake me up at 7",
        "remind us every 30 minutes to stretch",
        'set an alarm for 6:30 tomorrow',
        'remind me at noon to eat',
        'in 15 minutes remind me to check the pasta',
        'nudge me tonight at 9 to call grandma',
        'Erinnere mich um 18 Uhr an den Müll',
        "Rappelle-moi demain à 8h d'appeler le médecin",
        'Recuérdame en 10 minutos sacar la ropa',
    ),
    keywords=('remind', 'alarm', 'ping', 'nudge', 'wake', 'erinnere', 'rappelle', 'recuérdame'),
)
def set_reminder(ctx: ToolContext, args: SetReminderArgs) -> str:
    """Set a reminder."""
    now = local_now(ctx.now(), _zone_name(ctx))
    every = parse_repeat(args.repeat)
    due = _align_weekday(parse_when(args.when, now), args.repeat)
    if every and due <= now:
        # A recurring reminder given a time that already passed today starts at its next turn.
        due += timedelta(seconds=every * ((now - due).total_seconds() // every + 1))
    if due <= now:
        raise ValueError(f"{args.when!r} is {format_datetime(due)}, already past (now {format_datetime(now)})")
    with ctx.transaction():
        reminder = memory.add_reminder(
            ctx.store, ctx.scope, args.text, due.timestamp(), every_seconds=every, chat=ctx.chat, now=ctx.now()
        )
        payload = {"reminder_id": reminder.id, "text": reminder.text, "due": due.isoformat(), "every_seconds": every}
        ctx.emit("reminder.set", payload, agent=NAME)
    return f"Set {_line(ctx, reminder)}, {_zone_name(ctx)} time."


@tool(
    examples=(
        "what reminders do I have", "list my reminders", "show my reminders", "any reminders set?",
        "what am I being reminded of", "which alarms are on", "Welche Erinnerungen sind aktiv?", "Quels rappels ai-je ?",
        'show upcoming reminders',
        'which reminders are set',
        'do I have any alarms',
        'list all my alarms',
        'Zeig meine Erinnerungen',
        'Montre mes rappels',
        '¿Qué avisos tengo puestos?',
    ),
    keywords=('show', 'list', 'which', 'any', 'what', 'welche', 'quels', 'cuáles'),
)
def list_reminders(ctx: ToolContext, args: NoArgs) -> str:
    """List active reminders, soonest first."""
    reminders = memory.list_reminders(ctx.store, ctx.scope)
    now = format_datetime(local_now(ctx.now(), _zone_name(ctx)))
    if not reminders:
        return f"Now {now}. No active reminders."
    return "\n".join([f"Now {now}.", *(_line(ctx, reminder) for reminder in reminders)])


@tool(
    examples=(
        ("cancel reminder 2", {"id": 2}),
        ("delete reminder #5", {"id": 5}),
        "cancel the pills reminder",
        "stop reminding me about the meeting",
        "I don't need the oven reminder anymore",
        'drop the alarm for tomorrow',
        'remove reminder 3',
        'Lösche die Erinnerung an den Müll',
        'Annule le rappel pour le médecin',
        'cancel my 7am alarm',
        'turn off the reminder about the meeting',
        'no need to remind me about the bins',
        'Erinnerung 2 löschen',
        'Supprime le rappel de demain',
        'Cancela el recordatorio de las pastillas',
    ),
    keywords=('cancel', 'delete', 'remove', 'stop', 'drop', 'scrap', 'anymore', 'lösche', 'annule', 'cancela', 'borra'),
)
def cancel_reminder(ctx: ToolContext, args: ReminderIdArgs) -> str:
    """Cancel a reminder."""
    with ctx.transaction():
        reminder = memory.cancel_reminder(ctx.store, ctx.scope, args.id)
        if reminder is not None:
            ctx.emit("reminder.cancelled", {"reminder_id": reminder.id, "text": reminder.text}, agent=NAME)
    if reminder is None:
        return f"No active reminder #{args.id}; call list_reminders."
    return f"Cancelled {_line(ctx, reminder)}"


agent = AgentSpec(
    name=NAME,
    description="Reminders: remind the person at a time, once or repeating; list and cancel reminders.",
    instructions=(
        "Set, list and cancel reminders with your tools. Pass 'when' as the person said it "
        "('in 10 minutes', 'tomorrow 9am') or as ISO time; confirm the time the tool returns. Reminders are messages "
        "in this chat: nothing else."
    ),
    examples=(
        "remind me to call mom in 10 minutes",
        "remind me tomorrow at 9am to take the bins out",
        "set a reminder for 18:00 to leave for the station",
        "remind me every day at 8 to take my pills",
        "every monday at 9 remind me about the team meeting",
        "ping me in 2 hours to check the oven",
        "what reminders do I have",
        "list my reminders",
        "cancel the pills reminder",
        "stop reminding me about the meeting",
        "don't let me forget to water the plants on friday",
        "wake me up at 7",
        "remind us every 30 minutes to stretch",
        # The same requests in other languages: their words and character n-grams find
        # this agent when a message has no English in it (one per language; tests use others).
        "Erinnere mich morgen um 7 an den Zahnarzttermin",
        "Rappelle-moi ce soir de sortir le chien",
        "Recuérdame el viernes regar las plantas",
        "Напомни мне завтра в 7 про стоматолога",
        "明日7時に歯医者をリマインドして",
        "कल सुबह 7 बजे मुझे दंत चिकित्सक की याद दिलाना",
        "ذكرني غدا الساعة 7 بموعد طبيب الأسنان",
    ),
    keywords=(
        "reminder", "remind", "alarm", "ping", "forget", "alert", "notify",
        "erinnerung", "erinnere", "wecker", "rappel", "rappelle", "recordatorio", "recuérdame", "напоминание", "напомни", "リマインド", "リマインダー", "याद", "रिमाइंडर", "ذكرني", "تذكير",
    ),
    tools=(set_reminder, list_reminders, cancel_reminder),
    # reminder.fired is emitted on delivery, by the transport, in the reminders agent's name.
    emits=("reminder.set", "reminder.cancelled", "reminder.fired"),
    interests=("email.received", "task.created"),
    collaborators=("tasks", "inbox"),
)
