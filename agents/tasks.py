"""``tasks``: the scope's to-do list with due dates."""

from __future__ import annotations

from datetime import date

from pydantic import BaseModel, Field

from scopehub import memory

from ._dates import format_date, local_now, parse_date
from ._spec import AgentSpec, ToolContext, tool

NAME = "tasks"
_DUE_HELP = "YYYY-MM-DD or words: tomorrow, friday, in 3 days"
_CLEAR = {"none", "no", "clear", "remove", "null", "-"}


def _today(ctx: ToolContext) -> date:
    return local_now(ctx.now(), ctx.extra.get("timezone", "UTC")).date()


def _due(ctx: ToolContext, text: str | None) -> str | None:
    """A due phrase as YYYY-MM-DD in the person's zone; raises with a hint the model can act on."""
    if text is None or not text.strip():
        return None
    day = parse_date(text, _today(ctx))
    if day is None:
        raise ValueError(f"cannot read due date {text!r}; use {_DUE_HELP}")
    return day.isoformat()


def _line(task: memory.Task, today: date) -> str:
    text = f"#{task.id} {task.title}"
    if task.due:
        day = date.fromisoformat(task.due)
        text += f" (due {format_date(day)}"
        if not task.done and day < today:
            text += ", overdue"
        elif not task.done and day == today:
            text += ", today"
        text += ")"
    if task.done:
        text += " [done]"
    return text


class AddTaskArgs(BaseModel):
    title: str
    due: str | None = Field(None, description=_DUE_HELP)


class ListTasksArgs(BaseModel):
    done: bool = Field(False, description="include done tasks")


class TaskIdArgs(BaseModel):
    id: int


class EditTaskArgs(BaseModel):
    id: int
    title: str | None = None
    due: str | None = Field(None, description="new due date; 'none' clears it")


# Example utterances per tool: the embedded model picks its tool from them, and the ones
# with arguments are the demonstrations it writes arguments from (hosted models never see them).
_EMAIL_REPLY = (
    "[inbox agent] Kept email #4.\nFrom: Anna <anna@example.com>\nSubject: Venue\nDates: Monday = Mon 2024-03-11\n"
    "Action items:\n- Please book the venue by Monday."
)
_LIST_REPLY = "Today is Mon 4 Mar.\n#1 buy milk\n#2 finish the report"


@tool(
    examples=(
        ("new task: call the plumber", {"title": "call the plumber"}),
        ("add buy milk to my todo list", {"title": "buy milk"}),
        ("I need to finish the report by friday", {"title": "finish the report", "due": "friday"}),
        ("put that deadline on my tasks", {"title": "book the venue", "due": "Monday"}, _EMAIL_REPLY),
        "put renew passport on my list",
        "add a task to email the landlord",
        "todo: clean the garage",
        "add the deadline from the email to my tasks",
        "I have to pay the rent, add it as a task",
        'remember to buy stamps, put it on my list',
        'could you add water the plants to my to-do list',
        'I must renew the car registration before march',
        'please note down a task: return the library book',
        "add the deadline from Anna's email to my tasks",
        'put what Ram asked for on my list',
        'Ajoute « réserver le restaurant » à ma liste',
        'Pon comprar pan en mi lista',
        'Füge Milch zu meiner Einkaufsliste hinzu',
        'Neue Aufgabe: Fahrrad reparieren',
        'todo: book flights for july',
        'Añade llamar al banco a mis tareas',
        'Ajoute une tâche : payer le loyer',
        'Nouvelle tâche : acheter du pain',
    ),
    keywords=('add', 'put', 'todo', 'new', 'need', 'must', 'have to', 'füge', 'hinzu', 'neue', 'ajoute', 'añade', 'pon', 'agrega'),
)
def add_task(ctx: ToolContext, args: AddTaskArgs) -> str:
    """Add a task."""
    due = _due(ctx, args.due)
    with ctx.transaction():
        task = memory.add_task(ctx.store, ctx.scope, args.title, due, now=ctx.now())
        payload = {"task_id": task.id, "number": task.id, "title": task.title, "due": task.due}
        ctx.emit("task.created", payload, agent=NAME)
    return "Added " + _line(task, _today(ctx))


@tool(
    examples=(
        "what's on my to-do list",
        "show my open tasks",
        "what do I have due this week",
        "what's overdue",
        "what do I have to do today",
        "list my tasks",
        "show all my tasks, done ones too",
        "what's left on my list",
        'anything still open?',
        'read me my to-do list',
        'what do I need to get done',
        'Was steht auf meiner Aufgabenliste?',
        "Qu'est-ce que j'ai à faire ?",
        '¿Qué tengo pendiente?',
        'what tasks are due tomorrow',
        'Zeig meine Aufgaben',
        'Montre ma liste de tâches',
    ),
    keywords=('show', 'list', 'what', 'open', 'left', 'due', 'zeig', 'steht', 'montre', "qu'est-ce", 'muestra', 'pendiente'),
)
def list_tasks(ctx: ToolContext, args: ListTasksArgs) -> str:
    """List open tasks by due date."""
    today = _today(ctx)
    tasks = memory.list_tasks(ctx.store, ctx.scope, include_done=args.done)
    # Today's date lets the model answer "what is due this week" without guessing.
    header = f"Today is {format_date(today)}."
    if not tasks:
        return f"{header} No tasks."
    return "\n".join([header, *(_line(task, today) for task in tasks)])


@tool(
    examples=(
        ("mark task 3 as done", {"id": 3}),
        ("complete task 5", {"id": 5}),
        ("I finished the report, tick it off", {"id": 2}, _LIST_REPLY),
        ("done with #4", {"id": 4}),
        "tick off the plumber task",
        "I bought the milk, that one is done",
        "check off task 1",
        "I finished the report",
        "I've called the plumber",
        "I did the laundry",
        "finished cleaning the garage",
        "the passport renewal is done",
        "got the groceries, cross that off",
        'mark the rent task as done',
        'the report is finished',
        'Ich habe die Rechnung bezahlt',
        "J'ai fini le rapport",
        'Ya compré la leche',
        'cross off task 3',
    ),
    keywords=('done', 'finished', 'finish', 'did', 'completed', 'tick', 'cross', 'check', 'bought', 'called', 'erledigt', 'gekauft', 'fini', 'terminé', 'hecho', 'compré'),
)
def complete_task(ctx: ToolContext, args: TaskIdArgs) -> str:
    """Mark a task done."""
    with ctx.transaction():
        before = memory.get_task(ctx.store, ctx.scope, args.id)
        task = memory.complete_task(ctx.store, ctx.scope, args.id, now=ctx.now())
        if task is not None and before is not None and not before.done:
            ctx.emit("task.done", {"task_id": task.id, "number": task.id, "title": task.title}, agent=NAME)
    if task is None:
        return f"No task #{args.id}; call list_tasks to see the ids."
    return "Done: " + _line(task, _today(ctx))


@tool(
    examples=(
        ("change the due date of task 3 to next monday", {"id": 3, "due": "next monday"}),
        ("rename task 2 to pay the electricity bill", {"id": 2, "title": "pay the electricity bill"}),
        ("move task 4 to tomorrow", {"id": 4, "due": "tomorrow"}),
        "postpone the report task to friday",
        "remove the due date from task 1",
        "change the title of that task",
        'push the dentist task to next week',
        'make the report due on monday',
        'the plumber task should be due friday',
        'rename the milk task to buy oat milk',
        'Verschiebe Aufgabe 2 auf Montag',
        "change task 1's due date to tomorrow",
        'change the plumber task to thursday',
        'Ändere Aufgabe 3: fällig am Freitag',
        'Cambia la tarea 2 para el lunes',
        'Repousse la tâche 1 à demain',
    ),
    keywords=('move', 'change', 'rename', 'postpone', 'push', 'reschedule', 'verschiebe', 'ändere', 'déplace', 'cambia'),
)
def edit_task(ctx: ToolContext, args: EditTaskArgs) -> str:
    """Change a task's title or due date."""
    changes: dict[str, object] = {}
    if args.title:
        changes["title"] = args.title
    if args.due is not None:
        changes["due"] = None if args.due.strip().lower() in _CLEAR else _due(ctx, args.due)
    task = memory.edit_task(ctx.store, ctx.scope, args.id, now=ctx.now(), **changes)  # type: ignore[arg-type]
    if task is None:
        return f"No task #{args.id}; call list_tasks to see the ids."
    return "Updated " + _line(task, _today(ctx))


agent = AgentSpec(
    name=NAME,
    description="To-do list: add, list, complete and edit tasks with due dates.",
    instructions=(
        "Keep the person's to-do list with your tools; never claim a change you did not make. "
        "Pass due dates as said ('friday', 'in 3 days') or YYYY-MM-DD. "
        "Refer to tasks as #id; if unsure which one, list first."
    ),
    examples=(
        "add buy milk to my todo list",
        "new task: call the plumber",
        "I need to finish the report by friday",
        "what's on my to-do list",
        "show my open tasks",
        "what do I have due this week",
        "mark the plumber task as done",
        "I finished the report, tick it off",
        "change the due date of task 3 to next monday",
        "rename task 2 to pay the electricity bill",
        "put renew passport on my list, due in 3 days",
        "add the deadline from that email to my to-do list",
        "what's overdue",
        "what do I have to do today",
        "complete task 5",
        # The same requests in other languages: their words and character n-grams find
        # this agent when a message has no English in it (one per language; tests use others).
        "Neue Aufgabe: Steuererklärung bis Freitag erledigen",
        "Ajoute une tâche : appeler le plombier",
        "Nueva tarea: pagar la factura de la luz",
        "Добавь в список дел: оплатить счёт за свет",
        "タスクを追加：請求書を払う",
        "नया काम जोड़ो: बिजली का बिल भरना",
        "أضف مهمة جديدة: دفع فاتورة الكهرباء",
    ),
    keywords=(
        "task", "todo", "to-do", "list", "due", "deadline", "done", "finish",
        "aufgabe", "aufgaben", "tâche", "tâches", "tarea", "tareas", "pendientes", "задача", "задачи", "дела", "タスク", "やること", "काम", "कार्य", "مهمة", "مهام",
    ),
    tools=(add_task, list_tasks, complete_task, edit_task),
    emits=("task.created", "task.done"),
    # Deadlines in kept emails and reminders being set are what a to-do list should know of.
    interests=("email.received", "reminder.*"),
    collaborators=("inbox", "reminders"),
)
