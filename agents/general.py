"""``general``: small talk, help, and the fallback when no specialist fits."""

from __future__ import annotations

from ._spec import AgentSpec

agent = AgentSpec(
    name="general",
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
    ),
    keywords=("help", "hello", "joke", "chat", "bot", "question"),
    # The fallback answers "what's going on": it is shown what the specialists recorded.
    # fact.learned comes from the hub's fact keeper, not from a tool of this agent.
    interests=("fact.learned", "task.created", "note.saved", "email.received", "reminder.set"),
    collaborators=("tasks", "notes", "inbox", "reminders"),
    # The generalist keeps the team channel and its own lessons, goals and plans; the
    # specialists learn from feedback without paying for the tool's schema.
    team_tool=True,
)
