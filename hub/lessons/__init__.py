"""Learning from the person's feedback: a reaction on a reply, ``/feedback``, or a
correction in the next message becomes a lesson for the agent that answered.

:mod:`.signals` reads what feedback says without a model (zero tokens); :mod:`.learner`
asks the model for a validated lesson after the reply is sent, and keeps the feedback
verbatim when it cannot. The lessons reach that agent's calls only, as the ``lessons``
section (:mod:`scopehub.hub.context.lessons`).
"""

from scopehub.hub.lessons.learner import (
    LESSON_PROMPT,
    LessonDraft,
    LessonKeeper,
    parse_lesson,
    verbatim_lesson,
)
from scopehub.hub.lessons.show import format_channel, format_channels, format_memory
from scopehub.hub.lessons.signals import (
    NEGATIVE_REACTIONS,
    POSITIVE_REACTIONS,
    reaction_signal,
    text_signal,
)

__all__ = [
    "LESSON_PROMPT",
    "NEGATIVE_REACTIONS",
    "POSITIVE_REACTIONS",
    "LessonDraft",
    "LessonKeeper",
    "format_channel",
    "format_channels",
    "format_memory",
    "parse_lesson",
    "reaction_signal",
    "text_signal",
    "verbatim_lesson",
]
