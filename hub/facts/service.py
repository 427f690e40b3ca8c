"""The hub's facts service: the block for every call, and learning from what people say
(extraction, then reconciliation) after the reply is sent, off the request path.
"""

from __future__ import annotations

import json
import logging
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from scopehub.hub.context.record import text_digest
from scopehub.hub.context.tokens import Tokenizer
from scopehub.hub.dbwork import in_db_thread
from scopehub.hub.facts.block import render_block
from scopehub.hub.facts.commands import subject_of
from scopehub.hub.facts.extraction import EXTRACTOR_PROMPT, Candidate, parse_extraction
from scopehub.hub.facts.grounding import grounded, own_words
from scopehub.hub.facts.keys import infer_key, is_explicit, looks_factual
from scopehub.hub.facts.reconcile import Decision, learn
from scopehub.hub.facts.text import KNOWN_IN_PROMPT, MAX_FACT_CHARS, quote
from scopehub.hub.models import ChatModel, ModelResponse
from scopehub.hub.routing.lexicon import passes_on
from scopehub.memory import (
    CallRecord,
    Fact,
    Message,
    Store,
    current_facts,
)

log = logging.getLogger(__name__)


@dataclass
class Exchange:
    """One extractor call: what it was sent, what it answered, and what became of it."""

    prompt: list[dict[str, str]]
    response: ModelResponse | None = None
    error: Exception | None = None
    proposed: list[Candidate] | None = None  # None: no usable answer
    candidates: list[Candidate] = field(default_factory=list)  # what is kept: in the person's own words
    refused: list[Candidate] = field(default_factory=list)  # not in the person's own words
    own_sentences: bool = False  # the person's own sentences were kept instead
    decisions: list[Decision] = field(default_factory=list)
    latency_ms: float = 0.0

    def record(self) -> dict[str, Any]:
        """The call record's ``extra``: the prompt (the rules by their digest: the same text
        every call), the raw answer, each proposed fact and each reconciliation decision."""
        return {
            "prompt": {"system_sha": text_digest(self.prompt[0]["content"]), "user": self.prompt[1]["content"]},
            "answer": self.response.content if self.response is not None else None,
            "proposed": [c.model_dump() for c in self.proposed or ()],
            "refused": [{**c.model_dump(), "reason": "not in the person's own words"} for c in self.refused],
            "own_sentences": self.own_sentences,
            "decisions": [
                {"op": d.op.value, "key": d.fact.key if d.fact else None, "text": d.fact.text if d.fact else None,
                 "targets": list(d.targets), "reason": d.reason}
                for d in self.decisions
            ],
        }  # fmt: skip


@dataclass(frozen=True)
class LearningPlan:
    """What learning from one message needs from the store, read before the model is asked."""

    scope: str
    message: Message
    words: str  # the person's own words (a pasted email left out)
    subject: str
    speaker: str | None
    facts: list[Fact]


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
        """Ask the model for candidate facts; ``None`` when its answer is unusable. Records the call."""
        if self.model is None:
            return None
        exchange = await self._ask(message, known, speaker)
        self._record(message, exchange)
        if exchange.error is not None:
            raise exchange.error
        return exchange.proposed

    async def _ask(self, message: Message, known: Sequence[Fact], speaker: str | None) -> Exchange:
        """One extractor request and its parsed answer; a failure is kept, not raised."""
        exchange = Exchange(prompt=self.prompt(message, known, speaker))
        started = time.perf_counter()
        try:
            exchange.response = await self.model.complete(exchange.prompt, model=self.model_name, json_mode=True, timeout=self.timeout)  # type: ignore[union-attr]
        except Exception as exc:
            exchange.error = exc
        else:
            exchange.proposed = parse_extraction(exchange.response.content)
        exchange.latency_ms = (time.perf_counter() - started) * 1000
        return exchange

    def _record(self, message: Message, exchange: Exchange) -> None:
        """Record the extractor's call: its tokens count in usage like an agent call's, and
        the console shows its prompt, its answer and what became of each proposed fact.
        Accounting never blocks learning: this never raises."""
        response, error = exchange.response, exchange.error
        unusable = error is None and exchange.proposed is None
        try:
            self.store.record_call(
                CallRecord(
                    scope=message.scope,
                    agent="hub",
                    message_id=message.id,
                    via="extractor",
                    also_sees=(),
                    tokens={},
                    full_history_tokens=0,
                    model=(response.model if response else None) or self.model_name or getattr(self.model, "name", None),
                    prompt_tokens=response.prompt_tokens if response else None,
                    completion_tokens=response.completion_tokens if response else None,
                    latency_ms=exchange.latency_ms,
                    ok=error is None and not unusable,
                    error_class=type(error).__name__ if error is not None else ("UnusableAnswer" if unusable else None),
                    error_message=str(error) if error is not None else ("not the JSON asked for" if unusable else None),
                    extra=exchange.record(),
                )
            )
        except Exception:
            log.exception("fact extractor call not recorded for %s", message.scope)

    async def after_reply(self, scope: str, message: Message) -> None:
        """Learn from the person's message, off the request path (the hub calls this after sending)."""
        await self.learn_from(scope, message)

    async def learn_from(self, scope: str, message: Message) -> list[Decision]:
        """Extract candidate facts from ``message`` and reconcile them; returns the decisions taken."""
        words = self._words_to_learn(scope, message)
        if words is None:
            return []
        # The store's part before and after the model's, each in one step off the event loop
        # where the store waits on the network (scopehub.hub.dbwork).
        plan = await in_db_thread(self.store, self._plan, scope, message, words)
        exchange = await self.consult(plan)
        return await in_db_thread(self.store, self.keep_learnt, plan, exchange)

    # learn_from in its three parts, for a caller that runs the store's parts in steps of its
    # own (the hub after a reply: one thread hop for the reads of all its after-reply work,
    # one for the writes).
    def plan_learning(self, scope: str, message: Message) -> LearningPlan | None:
        """The store's part before the model's (call it in a store session, any thread); None
        when the message gets no extraction."""
        words = self._words_to_learn(scope, message)
        return self._plan(scope, message, words) if words is not None else None

    async def consult(self, plan: LearningPlan) -> Exchange:
        """The model's part: the extractor's candidates, those in the person's own words kept."""
        exchange = await self._ask(plan.message, plan.facts, plan.speaker)
        if exchange.error is not None:  # learning is best effort; the reply was already sent
            log.warning("fact extraction failed for %s: %s", plan.scope, exchange.error)
        proposed = list(exchange.proposed or ())
        exchange.candidates = [candidate for candidate in proposed if self._in_own_words(candidate, plan.words)]
        exchange.refused = [candidate for candidate in proposed if candidate not in exchange.candidates]
        if proposed and not exchange.candidates:
            # The extractor saw something but wrote it in words the person did not use: keep
            # the person's own sentence instead, when the local reader knows what it is about.
            exchange.candidates = own_sentences(plan.words, plan.subject)
            exchange.own_sentences = bool(exchange.candidates)
        return exchange

    def keep_learnt(self, plan: LearningPlan, exchange: Exchange) -> list[Decision]:
        """The store's part after the model's (in a store session, any thread): the candidates
        kept and the extractor's call recorded; returns the decisions taken."""
        exchange.decisions = self._keep(plan.scope, plan.message, exchange.candidates, plan.words, plan.subject)
        self._record(plan.message, exchange)
        return exchange.decisions

    def _words_to_learn(self, scope: str, message: Message) -> str | None:
        """The person's own words when the message gets an extraction; None when it gets none
        (the local pre-filter: no model call, no store read)."""
        if self.model is None or message.role != "user" or message.scope != scope:
            return None
        words = own_words(message.text)  # a pasted email is someone else's words, not facts the person states
        if passes_on(words):
            # "let the finance team know my address changed": news for a team, not a fact told to
            # the hub (the small extractor turned it into "The user's email is now changed ...").
            return None
        return words if looks_factual(words) else None

    def _plan(self, scope: str, message: Message, words: str) -> LearningPlan:
        """Whom the message is about, who speaks, and the scope's current facts."""
        subject, speaker = subject_of(self.store, scope, message.id)
        return LearningPlan(scope, message, words, subject, speaker, current_facts(self.store, scope))

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
        stated = [
            candidate.model_copy(update={"text": _IN_PASSING.sub("", candidate.text)})
            for candidate in own_sentences(words, subject)
            if _SPEAKER_FIRST.match(candidate.text)
        ]
        return self._keep(scope, message, stated, words, subject)

    def _keep(self, scope: str, message: Message, candidates: Sequence[Candidate], words: str, subject: str) -> list[Decision]:
        if not candidates:
            return []
        # Reads the current facts, then writes what reconciling them gave in one transaction (see learn).
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
# German, French and Spanish speakers too ("Ich wohne ...", "J'habite ...", "Mi hija ..."),
# and Spanish verbs that carry their own subject ("Vivo en ...", "Trabajo en ...", "Me llamo ...").
# Words that say a fact is told in passing: "btw my flat is number 12", "Au fait, j'habite ...",
# "Por cierto, mi banco es ...": the fact is what follows them.
_IN_PASSING = re.compile(
    r"^\s*(?:(?:btw|by\s+the\s+way|fyi|oh|also|and|just\s+so\s+you\s+know|übrigens|ach\s+ja|au\s+fait|d['’]ailleurs|et|por\s+cierto|y)[,:!]?\s+)+",
    re.I,
)
_SPEAKER_FIRST = re.compile(
    rf"(?:{_IN_PASSING.pattern})?"
    r"(?:my|i|i'm|i am|i've|our|we|we're|ich|mein|meine|wir|unser|unsere|je|j'|mon|ma|nous|notre|yo|mi|mis|nuestro|nuestra"
    r"|me llamo|vivo|resido|trabajo)(?:\b|(?<=')|(?=\s))",
    re.I,
)
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
