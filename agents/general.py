"""``general``: small talk, help, and the fallback when no specialist fits."""

from __future__ import annotations

from ._spec import AgentSpec

agent = AgentSpec(
    name="general",
    description="Small talk, questions about the bot, anything no specialist covers.",
    instructions="Answer friendly and short. If a specialist fits better, say which (/tasks, /notes, /inbox, /reminders).",
    examples=(
        "hi there",
        "how are you",
        "what can you do",
        "tell me a joke",
        "thanks for your help",
        "who are you",
        "what is the capital of France",
    ),
)
