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
)
