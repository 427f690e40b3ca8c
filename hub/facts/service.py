"""The hub's facts service: the block for every call, and learning from what people say
(extraction, then reconciliation) after the reply is sent, off the request path.
"""

from __future__ import annotations

import json
import logging
import re
import time
from collections.abc import Callable, Sequence

from scopehub.hub.context.tokens import Tokenizer
from scopehub.hub.facts.block import render_block
from scopehub.hub.facts.commands import subject_of
from scopehub.hub.facts.extraction import EXTRACTOR_PROMPT, Candidate, parse_extraction
from scopehub.hub.facts.grounding import grounded, own_words
from scopehub.hub.facts.keys import infer_key, is_explicit, looks_factual
from scopehub.hub.facts.reconcile import Decision, learn
from scopehub.hub.facts.text import KNOWN_IN_PROMPT, MAX_FACT_CHARS, quote
from scopehub.hub.models import ChatModel
from scopehub.memory import (
    CallRecord,
    Fact,
    Message,
    Store,
    current_facts,
)

log = logging.getLogger(__name__)


class FactKeeper:
    """The hub's facts service: the block for every call, and learning after a reply is sent."""

    def __init__(
        self,
        store: Store,
        model: ChatModel | None = None,
        *,
        model_name: str | None = None,
        clock: Callable[[], float] = time.time,
        timeout: float = 30.0,
    ) -> None:
        self.store = store
        self.model = model
        self.model_name = model_name
        self.clock = clock
        self.timeout = timeout

    def block(self, scope: str, tokenizer: Tokenizer, budget: int) -> str:
        """The scope's facts for the system message, within ``budget`` tokens."""
        return render_block(current_facts(self.store, scope), tokenizer, budget)

    def prompt(self, message: Message, known: Sequence[Fact], speaker: str | None = None) -> list[dict[str, str]]:
        """The extractor's messages: the rules, the known facts and the message, all quoted."""
        lines = []
        recent = sorted(known, key=lambda fact: -fact.id)[:KNOWN_IN_PROMPT]
        if recent:
            lines.append("Known facts:")
            lines.extend(f"- {fact.key or '(no key)'}: {quote(fact.text, 200)}" for fact in recent)
        else:
            lines.append("Known facts: none")
        if speaker:
            lines.append(f"Speaker (the subject of 'I' and 'my'): {quote(speaker, 60)}")
        lines.append("Message: " + json.dumps(own_words(message.text)[:2000], ensure_ascii=False))
        return [{"role": "system", "content": EXTRACTOR_PROMPT}, {"role": "user", "content": "\n".join(lines)}]

    async def extract(self, message: Message, known: Sequence[Fact], speaker: str | None = None) -> list[Candidate] | None:
        """Ask the model for candidate facts; ``None`` when its answer is unusable."""
        if self.model is None:
            return None
        response = await self.model.complete(
            self.prompt(message, known, speaker), model=self.model_name, json_mode=True, timeout=self.timeout
        )
        try:  # the extractor's tokens count in usage like an agent call's; accounting never blocks learning
            self.store.record_call(
                CallRecord(
                    scope=message.scope,
                    agent="hub",
                    message_id=message.id,
                    via="extractor",
                    also_sees=(),
                    tokens={},
                    full_history_tokens=0,
                    model=response.model or self.model_name or getattr(self.model, "name", None),
                    prompt_tokens=response.prompt_tokens,
                    completion_tokens=response.completion_tokens,
                )
            )
        except Exception:
            log.exception("fact extractor usage not recorded for %s", message.scope)
        return parse_extraction(response.content)

    async def after_reply(self, scope: str, message: Message) -> None:
        """Learn from the person's message, off the request path (the hub calls this after sending)."""
        await self.learn_from(scope, message)

    async def learn_from(self, scope: str, message: Message) -> list[Decision]:
        """Extract candidate facts from ``message`` and reconcile them; returns the decisions taken."""
        if self.model is None or message.role != "user" or message.scope != scope:
            return []
        words = own_words(message.text)  # a pasted email is someone else's words, not facts the person states
        if not looks_factual(words):
            return []  # the local pre-filter: no model call
        subject, speaker = subject_of(self.store, scope, message.id)
        try:
            candidates = await self.extract(message, current_facts(self.store, scope), speaker)
        except Exception as exc:  # learning is best effort; the reply was already sent
            log.warning("fact extraction failed for %s: %s", scope, exc)
            return []
        proposed = list(candidates or ())
        candidates = [candidate for candidate in proposed if self._in_own_words(candidate, words)]
        if proposed and not candidates:
            # The extractor saw something but wrote it in words the person did not use: keep
            # the person's own sentence instead, when the local reader knows what it is about.
            candidates = own_sentences(words, subject)
        return self._keep(scope, message, candidates, words, subject)

    def learn_stated(self, scope: str, message: Message) -> list[Decision]:
        """Keep the facts the person states in words the local key reader knows ("my phone
        number is 555 0142", "I live in Hamburg"), now: zero tokens, so the hub does it
        before the reply and the next message knows them however quickly it comes. The
        model's extraction after the reply still reads the message for the rest."""
        if message.role != "user" or message.scope != scope:
            return []
        words = own_words(message.text)
        if not looks_factual(words):
            return []
        subject, _ = subject_of(self.store, scope, message.id)
        # Only sentences that start with the speaker ("my phone number is", "I live in"):
        # the key reader also finds "my boss" in "here is an email from my boss: ...".
        stated = [candidate for candidate in own_sentences(words, subject) if _SPEAKER_FIRST.match(candidate.text)]
        return self._keep(scope, message, stated, words, subject)

    def _keep(self, scope: str, message: Message, candidates: Sequence[Candidate], words: str, subject: str) -> list[Decision]:
        if not candidates:
            return []
        # No await from here on: reading current facts and writing the result cannot interleave.
        decisions, _ = learn(
            self.store,
            scope,
            list(candidates),
            confidence="derived",
            explicit_message=is_explicit(words),
            source_message=message.id,
            subject=subject,
            now=self.clock(),
            require_message=True,
        )
        return decisions

    @staticmethod
    def _in_own_words(candidate: Candidate, words: str) -> bool:
        """A candidate that would store something must take its values from the message;
        a retraction stores nothing and only ever matches facts already kept."""
        if candidate.op in ("invalidate", "noop") or grounded(candidate.text, candidate.key, words):
            return True
        log.info("fact candidate refused, not in the person's words: %.200r", candidate.text)
        return False


_SENTENCE = re.compile(r"(?<=[.!?;])\s+|\n+")
_SPEAKER_FIRST = re.compile(r"^\s*(?:my|i|i'm|i am|i've|our|we|we're)\b", re.I)
# A request ("write a reply to Dana saying Thursday works for me") states no fact of its own.
_REQUEST = re.compile(
    r"^\s*(?:please\s+|can you\s+|could you\s+|would you\s+)?(?:add|put|write|draft|reply|answer|send|remind|set|"
    r"cancel|delete|remove|show|list|tell|find|search|note|save|keep|jot|mark|complete|tick|move|change|rename|book|call me back)\b",
    re.I,
)


def own_sentences(words: str, subject: str = "user") -> list[Candidate]:
    """Candidate facts that are the person's own sentences, where the local key reader
    recognises one ("I'm vegetarian" -> ``user.diet``)."""
    found = []
    for sentence in _SENTENCE.split(words):
        sentence = sentence.strip()
        if not sentence or _REQUEST.match(sentence):
            continue
        key, kind = infer_key(sentence, subject=subject)
        if key:
            found.append(Candidate(text=sentence[:MAX_FACT_CHARS], kind=kind, key=key, op="add"))
    return found
