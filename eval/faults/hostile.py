"""Hostile input: hypothesis-generated text through every part of the hub, and one huge message."""

from __future__ import annotations

import asyncio
import logging
import random
import re
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from scopehub.hub.context import build_context
from scopehub.hub.errors import RouterError
from scopehub.hub.facts import current as current_facts
from scopehub.hub.facts import (
    forget,
    infer_key,
    is_explicit,
    looks_factual,
    normalise_key,
    parse_extraction,
    quote,
    remember,
)
from scopehub.hub.models.testing import FunctionModel
from scopehub.hub.orchestrator import (
    Inbound,
    Reply,
)
from scopehub.hub.routing import detect_explicit, route
from scopehub.hub.routing.llm_router import build_router_messages, parse_router_answer
from scopehub.memory import (
    SEARCH_METHODS,
    Message,
    NewMessage,
    Store,
    add_vault_item,
)

from .. import _report
from ._harness import (
    WORDS,
    HashEmbedder,
    LogRecords,
    available_search_methods,
    echo_model,
    is_extraction,
    last_user_text,
    make_hub,
)
from ._outcome import (
    HOSTILE_TRIED,
    HUGE_KEPT,
    Outcome,
    Scenario,
    timed,
)

log = logging.getLogger(__name__)


_FTS_PIECES = (
    '"', '""', "'", "NEAR(", "NEAR(a b, 2)", "NEAR", "AND", "OR", "NOT", "*", "^", ":", "(", ")", "-", "+",
    "body:", "ctx:", "{body ctx}:", "search_fts", "MATCH", "rowid", "%", "_", "\\", "'; DROP TABLE messages; --",
    "' OR 1=1 --", "a*", "^start", '"unterminated', "col:term",
)  # fmt: skip
_UNICODE_PIECES = (
    "\x00", "\x01", "\x07", "\x1b[31m", "\x7f", "\u0085", "\u2028", "\u2029", "\r\n", "\r", "\t", "\u200b", "\u200c",
    "\u200d", "\u2060", "\ufeff", "\u202e", "\u202d", "\u200f", "\u061c", "\u0301", "e\u0301", "שלום עולם", "مرحبا بك",
    "Привет", "你好世界", "日本語のテキスト", "👩\u200d👩\u200d👧\u200d👦", "🏳️\u200d🌈", "👍🏽", "🙂", "\U0001f600",
    "\U0010ffff", "\ufffd", "\uffff", "ǅ", "ß", "İ", "ﬃ", "Ａｂｃ", "𝔘𝔫𝔦𝔠𝔬𝔡𝔢", "Z̴̡̪̈́a̷l̸g̵o̶", "\u0000\u0000",
)  # fmt: skip
_HUB_PIECES = (
    "/remember", "/forget", "/search", "/facts", "/usage", "/help", "/start", "/tasks", "/notes", "/inbox", "@tasks",
    "@reminders", "@general", "/tasks@some_bot", "/", "@", "#1", "#999999999999999999999", "-1", "9" * 30, "user:2",
    "group:-5", '{"agent": "tasks", "also_sees": ["inbox"]}', '{"facts": [{"text": "x", "key": "a.b", "op": "update"}]}',
    '{"facts": [{"text": "", "op": "invalidate"}]}', "```json", "[hub]", "<script>alert(1)</script>", "{{7*7}}",
    "${HOME}", "%s%n", "my email is a@b.co", "I am vegetarian", "call me Ram", "my locker code is", "all",
)  # fmt: skip
_PIECES = _FTS_PIECES + _UNICODE_PIECES + _HUB_PIECES + WORDS


def hostile_text(max_huge: int = 100_000) -> Any:
    """A hypothesis strategy for hostile chat text.

    Any code point but lone surrogates (they are not valid UTF-8 and no transport delivers
    them), FTS5 and SQL syntax, control characters, zero-width and bidi marks, emoji
    sequences, right-to-left scripts, hub commands and mentions, JSON the router or the
    fact extractor might parse; one text in about 300 is huge (1,000-``max_huge`` chars).
    """
    from hypothesis import strategies as st

    chars = st.characters(exclude_categories=("Cs",))
    piece = st.one_of(st.text(chars, max_size=12), st.sampled_from(_PIECES))
    mixed = st.tuples(st.lists(piece, max_size=16), st.sampled_from(("", " ", "  ", "\n", " AND ", ":", "\x00"))).map(
        lambda parts: parts[1].join(parts[0])
    )

    def repeat(spec: tuple[str, int]) -> str:
        unit, size = spec[0] or "x", spec[1]
        return (unit * (size // len(unit) + 1))[:size]

    huge = st.tuples(piece, st.integers(1_000, max_huge)).map(repeat)

    @st.composite
    def text(draw: Any) -> str:
        roll = draw(st.integers(0, 999))
        if roll < 3:
            return draw(huge)
        if roll < 350:
            return draw(st.text(chars, max_size=300))
        return draw(mixed)

    return text()


VICTIM_SCOPE = "group:-424242"
VICTIM_SECRET = "victimsecretq7z3"


class HostileProbe:
    """Feeds one text to every target and counts what escaped; one event loop, one store.

    Targets: ``route`` and ``detect_explicit``; the LLM router's prompt builder and answer
    parser; ``build_context`` (the text as the message and, later, in the history); the
    facts' parsers, ``remember`` / ``current`` / ``forget``; ``Store.append`` (the text
    must come back whole) and ``Store.search`` with every available method (no hit may
    come from another scope); and, every ``hub_every``-th text, ``Hub.handle`` with the
    text, ``/remember``, ``/forget`` and ``/search`` of it, and fact extraction whose
    model answers with the text itself.
    """

    def __init__(
        self,
        workdir: Path,
        *,
        seed: int = 0,
        hub_every: int = 10,
        rotate_every: int = 500,
        window: int = 8,
        every_method: bool = True,
    ) -> None:
        workdir.mkdir(parents=True, exist_ok=True)
        self.rng = random.Random(seed)
        self.store = Store(workdir / "hostile.db")
        self.current = ""
        self.model = FunctionModel(self._answer, name="hostile")
        self.hub = make_hub(self.store, self.model, facts=True)
        self.agents = self.hub.registry.names
        self.tokenizer = self.hub.deps.tokenizer
        self.budget = self.hub.settings.message_tokens
        self.loop = asyncio.new_event_loop()
        self.methods = available_search_methods()
        self.embedder = HashEmbedder() if "semantic" in self.methods else None
        self.hub_every = hub_every
        self.every_method = every_method  # False: one search method per text, in turn (the long report)
        self.rotate_every = rotate_every
        self.window_size = window
        self.window: list[Message] = []
        self.examples = 0
        self.hub_examples = 0
        self.calls = 0
        self.lost = 0
        self.leaked = 0
        self.crashed = 0
        self.failures: Counter[str] = Counter()
        self.events: list[tuple[str, str, str, str]] = []  # (count, target, detail, text), the first 1000
        # (count, target, error with digits folded) -> [how often, the shortest text that caused it]
        self.signatures: dict[tuple[str, str, str], list[Any]] = {}
        # The hub catches a failing command and logs it: keep the exception for the report.
        self.hub_errors = LogRecords()
        self.hub_errors.setLevel(logging.ERROR)
        logging.getLogger("scopehub.hub.orchestrator").addHandler(self.hub_errors)
        # Another scope holding every hostile piece and a secret: no search may ever return it.
        for piece in (*_PIECES, f"the secret is {VICTIM_SECRET}"):
            self.store.append(NewMessage(scope=VICTIM_SCOPE, role="user", text=f"{piece} {VICTIM_SECRET}", sender="v"))
        add_vault_item(self.store, VICTIM_SCOPE, "note", f"milk tasks email {VICTIM_SECRET}", title=VICTIM_SECRET)

    def close(self) -> None:
        logging.getLogger("scopehub.hub.orchestrator").removeHandler(self.hub_errors)
        self.loop.close()
        self.store.close()

    def summary(self, limit: int = 20) -> list[str]:
        """The distinct failures, most frequent first, each with the shortest text that caused it."""
        ranked = sorted(self.signatures.items(), key=lambda item: -item[1][0])[:limit]
        return [f"{count} in {target} x{n}: {sig} <- {text[:80]!r} ({len(text)} chars)" for (count, target, sig), (n, text) in ranked]

    def _answer(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> str:
        if is_extraction(messages):
            return self.current  # the extractor gets the hostile text as its "JSON"
        return "ok: " + last_user_text(messages)[:50]

    @property
    def scope(self) -> str:
        # A fresh scope now and then keeps facts and windows small, as in real chats.
        return f"user:{1000 + self.examples // self.rotate_every}"

    def _failed(self, count: str, target: str, text: str, detail: str) -> None:
        setattr(self, count, getattr(self, count) + 1)
        self.failures[f"{count} {target}"] += 1
        if len(self.events) < 1000:
            self.events.append((count, target, detail, text))
        # One signature per error, whatever the data quoted after "with text" or the numbers in it.
        key = (count, target, re.sub(r"\d+", "N", detail.split(" with text ")[0])[:110])
        entry = self.signatures.setdefault(key, [0, text])
        entry[0] += 1
        if len(text) < len(entry[1]):
            entry[1] = text

    def _call(self, target: str, text: str, fn: Callable[[], Any], allowed: tuple[type[BaseException], ...] = ()) -> Any:
        self.calls += 1
        try:
            return fn()
        except allowed:
            return None
        except Exception as exc:
            self._failed("crashed", target, text, f"{type(exc).__name__}: {exc}")
            return None

    def probe(self, text: str) -> None:
        """Every target with ``text``."""
        self.examples += 1
        self.current = text
        scope = self.scope
        if self.window and self.window[-1].scope != scope:
            self.window = []
        clf = self.hub.classifier
        reply_to = self.window[-1] if self.window and self.rng.random() < 0.2 else None
        self._call("route", text, lambda: route(text, classifier=clf, window=self.window, reply_to=reply_to, default_also_sees=self.hub.default_also_sees))
        self._call("detect_explicit", text, lambda: detect_explicit(text, self.agents))
        self._call("llm_router.build_router_messages", text, lambda: build_router_messages(text, self.hub.profiles, self.window))
        self._call("llm_router.parse_router_answer", text, lambda: parse_router_answer(text, self.agents), (RouterError,))
        agent = self.agents[self.examples % len(self.agents)]
        context = self._call(
            "build_context",
            text,
            lambda: build_context(
                self.hub.prompts[agent], self.window, text, tokenizer=self.tokenizer, facts_block=self.hub.facts_block(scope), message_tokens=self.budget
            ),
        )
        # Below 2,000 characters the message reaches the model whole unless it is over its token budget.
        if context is not None and len(text) < 2000 and context.messages[-1]["content"] != self.tokenizer.truncate(text, self.budget):
            self._failed("lost", "build_context", text, "a short message was altered on its way to the model")
        for name, fn in (
            ("facts.looks_factual", looks_factual),
            ("facts.is_explicit", is_explicit),
            ("facts.infer_key", infer_key),
            ("facts.parse_extraction", parse_extraction),
            ("facts.quote", quote),
            ("facts.normalise_key", normalise_key),
        ):
            self._call(name, text, lambda fn=fn: fn(text))
        self._call("facts.remember", text, lambda: self._remember(scope, text), ())
        self._call("facts.current", text, lambda: current_facts(self.store, scope))
        self._call("facts.forget", text, lambda: forget(self.store, scope, text))
        stored = self._call("store.append", text, lambda: self.store.append(NewMessage(scope=scope, role="user", text=text)))
        if stored is not None:
            back = self.store.get(scope, stored.id)
            if back is None or back.text != text:
                self._failed("lost", "store.append", text, "the stored text does not come back whole")
            self.window = [*self.window, stored][-self.window_size :]
        methods = self.methods if self.every_method else (self.methods[self.examples % len(self.methods)],)
        for method in methods:
            hits = self._call(f"store.search[{method}]", text, lambda method=method: self.store.search(scope, text, k=5, method=method, embedder=self.embedder))
            for hit in hits or ():
                if VICTIM_SECRET in hit.text or VICTIM_SECRET in hit.snippet:
                    self._failed("leaked", f"store.search[{method}]", text, "returned another scope's message")
        if self.hub_every and self.examples % self.hub_every == 0:
            self.hub_examples += 1
            self.loop.run_until_complete(self._through_hub(text, scope))

    def _remember(self, scope: str, text: str) -> Any:
        try:
            return remember(self.store, scope, text)
        except ValueError as exc:
            if str(exc) == "a fact needs some text":  # documented: blank after cleaning
                return None
            raise

    async def _through_hub(self, text: str, scope: str) -> None:
        n = self.examples
        for target, message in (
            ("hub.handle", text),
            ("hub /remember", "/remember " + text),
            ("hub /forget", "/forget " + text),
            ("hub /search", "/search " + text),
        ):
            self.calls += 1
            logged = len(self.hub_errors.records)
            try:
                reply = await self.hub.handle(Inbound(scope=scope, text=message, ext_id=f"{target}:{n}", sender="h"))
                if reply is not None and reply.kind == "command" and reply.text.endswith("failed; nothing was lost. Please try again."):
                    errors = [r.exc_info[1] for r in self.hub_errors.records[logged:] if r.exc_info and r.exc_info[1]]
                    cause = f"{type(errors[-1]).__name__}: {errors[-1]}" if errors else "?"
                    self._failed("crashed", target, text, f"the command raised inside the hub (caught and logged): {cause}")
                if target == "hub.handle":
                    await self.hub.after_send(reply)
            except Exception as exc:
                self._failed("crashed", target, text, f"{type(exc).__name__}: {exc}")
        self.model.calls.clear()
        del self.hub_errors.records[:]
        if self.window and self.store.get(self.window[-1].scope, self.window[-1].id) is None:
            self.window = []  # "/forget all" erased the scope


def huge_message(workdir: Path, *, chars: int = 100_000, out: Outcome | None = None) -> Outcome:
    """A 100,000-character message: stored whole, handled, searchable; the model gets it trimmed to its budget."""
    out = out if out is not None else Outcome("huge_message")
    out.verified.setdefault(HUGE_KEPT, 0)
    failures = out.failures
    with timed(out):
        workdir.mkdir(parents=True, exist_ok=True)
        rng = random.Random(chars)
        marker = "tailmarkerzq9"
        body: list[str] = []
        size = 0
        while size < chars - len(marker) - 1:
            # No @mentions or /commands: an explicit address is cut out of the text the agent gets.
            piece = rng.choice(_FTS_PIECES + _UNICODE_PIECES) if rng.random() < 0.3 else rng.choice(WORDS)
            body.append(piece)
            size += len(piece) + 1
        head = "Here is a long paste: "  # a plain message, not a /command
        text = head + (" ".join(body))[: chars - len(head) - len(marker) - 1] + " " + marker
        with Store(workdir / "huge.db") as store:
            model = echo_model()
            hub = make_hub(store, model, facts=True)
            budget = hub.settings.message_tokens
            tokenizer = hub.deps.tokenizer

            async def run() -> tuple[Reply | None, Reply | None]:
                first = await hub.handle(Inbound(scope="user:31337", text=text, ext_id="huge"))
                await hub.after_send(first)
                second = await hub.handle(Inbound(scope="user:31337", text="and what did I just send?", ext_id="after"))
                return first, second

            try:
                first, second = asyncio.run(run())
            except Exception as exc:
                out.fail("crashed", f"the huge message: {type(exc).__name__}: {exc}")
                return out
            if first is None or first.message_id is None:
                out.fail("crashed", "the huge message got no reply")
                return out
            stored = store.get(first.scope, first.message_id)
            if stored is None or stored.text != text or len(stored.text) != chars:
                out.fail("lost", f"the huge message is not stored whole ({len(stored.text) if stored else 0} of {chars} chars)")
            agent_calls = [call for call in model.calls if not is_extraction(call.messages)]
            sent = agent_calls[0].messages[-1]["content"] if agent_calls else ""
            if sent != tokenizer.truncate(text, budget) or tokenizer.count(sent) > budget:
                out.fail("crashed", f"the model got {tokenizer.count(sent)} tokens of the message, budget {budget}")
            if len(agent_calls) > 1:
                history = [m["content"] for m in agent_calls[1].messages[1:-1]]
                longest = max((tokenizer.count(h) for h in history), default=0)
                if not any(marker not in h and h[:50] == text[:50] for h in history) or longest > 1000:
                    out.fail("crashed", f"the next call's history does not carry the huge message trimmed (longest {longest} tokens)")
            if second is None or second.kind != "agent":
                out.fail("crashed", "the message after the huge one got no answer")
            hits = store.search("user:31337", marker, k=3)
            if not any(hit.id == first.message_id for hit in hits):
                out.fail("lost", "the huge message's last word is not searchable")
            out.note(f"a {chars:,}-character message: stored whole, the model got {tokenizer.count(sent)} tokens (budget {budget})")
    if out.failures == failures:
        out.verify(HUGE_KEPT)
    return out


def hostile_input(
    workdir: Path,
    *,
    examples: int = 100_000,
    seed: int = 0,
    hub_every: int = 10,
    every_method: bool | None = None,
    progress: bool = False,
) -> Outcome:
    """Hypothesis-generated text through every target (see :class:`HostileProbe`), plus the huge message."""
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis import seed as hypothesis_seed

    out = Outcome("hostile_input", verified={HOSTILE_TRIED: 0})
    with timed(out):
        # Beyond a few thousand texts, one search method per text in turn keeps the run in minutes.
        every_method = examples <= 5000 if every_method is None else every_method
        probe = HostileProbe(workdir, seed=seed, hub_every=hub_every, every_method=every_method)
        bar = _report.Progress(examples, "hostile input", enabled=progress)

        @hypothesis_seed(seed)
        @settings(
            max_examples=examples,
            deadline=None,
            database=None,
            phases=[Phase.generate],
            suppress_health_check=list(HealthCheck),
        )
        @given(hostile_text())
        def run(text: str) -> None:
            probe.probe(text)
            bar.advance()

        try:
            run()
        except Exception as exc:  # a failure of the harness itself, not of a target
            out.fail("crashed", f"the generator stopped: {type(exc).__name__}: {exc}")
        finally:
            bar.close()
            probe.close()
        out.verify(HOSTILE_TRIED, probe.examples)
        out.lost, out.leaked, out.crashed = probe.lost, probe.leaked, probe.crashed
        out.note(
            f"{probe.examples:,} hypothesis examples, {probe.calls:,} target calls, {probe.hub_examples:,} of them also "
            f"through Hub.handle (text, /remember, /forget, /search, extraction); search methods: {', '.join(probe.methods)} "
            + ("(each text through every method)" if every_method else "(one method per text, in turn)")
        )
        if len(probe.methods) < len(SEARCH_METHODS):
            out.note("semantic and hybrid_semantic search not tried: numpy is not installed")
        for key, n in probe.failures.most_common(10):
            out.note(f"{key}: {n}")
        for line in probe.summary():
            out.note(line)
        out.details.update(failures=dict(probe.failures), summary=probe.summary(50))
        huge_message(workdir, out=out)
    return out




SCENARIOS = {"hostile_input": Scenario(hostile_input, heavy={"examples": 100_000}, quick={"examples": 300})}
