"""The extractive digest and fragments: salient sentences chosen locally, no model call. Pure.

Every line is a sentence (or a clause of a long one) of one message, verbatim, with
that message's id, speaker and time: traceable by construction.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from zoneinfo import ZoneInfo

from scopehub.hub.context.tokens import Tokenizer
from scopehub.hub.digest.render import fit_lines
from scopehub.hub.digest.text import Salience, sentences
from scopehub.memory import DigestLine, Message

__all__ = ["candidate_lines", "extractive_digest", "speaker"]

PER_MESSAGE = 2  # sentences of one message that may compete for the digest


def speaker(message: Message) -> str:
    """Who wrote ``message``, as a digest line names them."""
    if message.sender:
        return message.sender
    if message.role == "agent":
        return f"{message.agent or 'assistant'} agent"
    return "User"


def candidate_lines(messages: Iterable[Message], salience: Salience, *, per_message: int = PER_MESSAGE) -> list[DigestLine]:
    """The best ``per_message`` sentences of each message, scored; filler (score 0) left out."""
    lines: list[DigestLine] = []
    for message in messages:
        if message.via == "command":  # talk to the hub, not conversation
            continue
        scored = [(salience.score(text), text) for text in sentences(message.text)]
        scored = sorted((item for item in scored if item[0] > 0), key=lambda item: -item[0])[:per_message]
        lines.extend(
            DigestLine(text=text, sources=(message.id,), ts=message.ts, who=speaker(message), score=score)
            for score, text in scored
        )
    return lines


def extractive_digest(
    messages: Sequence[Message],
    previous: Sequence[DigestLine],
    salience: Salience,
    *,
    tokenizer: Tokenizer,
    budget: int,
    zone: ZoneInfo,
) -> list[DigestLine]:
    """Fold ``messages`` into ``previous`` lines (rescored with today's statistics) within ``budget``."""
    rescored = [
        DigestLine(text=line.text, sources=line.sources, ts=line.ts, who=line.who, score=salience.score(line.text))
        for line in previous
    ]
    return fit_lines([*rescored, *candidate_lines(messages, salience)], tokenizer, budget, zone)
