"""The digest service: the section every call gets (read only, on the request path) and the
compaction that keeps it up to date (in the background, after the reply is sent).

A scope's digest is shared by all its agents: one compaction serves every agent. It is
compacted once ``HUB_DIGEST_EVERY`` messages have left the window since the last
compaction, under the scope's ``digest`` claim, so two workers never compact one scope at
once. Each call records the path its digest took:

- ``cached``: the same digest version the scope's previous call got;
- ``incremental``: since the previous call, new messages were folded into the digest;
- ``full``: since the previous call, the scope's first digest was made;
- ``full_recompact``: since the previous call, the digest was rebuilt from its source
  messages (every ``RECOMPACT_EVERY`` folds, when a fold came out over budget or mostly
  untraceable, or when a line's source message is gone);
- ``none``: no digest (too little history, or the digest is off): the section is omitted
  and the window's raw messages are all the agent sees of the past.

Fail-open: a compaction that times out, errs or writes untraceable lines keeps the
cached digest (counted as ``failed``); with no digest to keep, the extractive digest
(sentences of the messages themselves, no model) stands in, and the model rebuilds it
once it answers again. Reading the digest for a call that fails means no section and a
log line; a stored row that does not read (corrupt, wrong-shaped) is never shown, and
the next compaction rebuilds it from the messages.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any, NamedTuple
from zoneinfo import ZoneInfo

from scopehub.hub.context.tokens import Tokenizer, get_tokenizer
from scopehub.hub.dbwork import in_db_thread
from scopehub.hub.digest.compaction import check_items, compaction_messages, parse_items
from scopehub.hub.digest.extractive import extractive_digest, speaker
from scopehub.hub.digest.render import fit_lines, render_digest, render_lines
from scopehub.hub.digest.text import Salience, SourceText
from scopehub.hub.models import ChatModel
from scopehub.hub.settings import Settings
from scopehub.memory import (
    ClaimLease,
    Digest,
    DigestLine,
    Message,
    Store,
    get_digest,
    messages_after,
    read_digest,
    record_digest_failure,
    save_digest,
)

__all__ = [
    "BACKGROUND_CLAIMS",
    "DIGEST_CLAIM",
    "REFLECT_CLAIM",
    "CompactionReport",
    "DigestKeeper",
    "DigestSection",
    "resolve_mode",
]

log = logging.getLogger(__name__)

DIGEST_CLAIM = "digest"
REFLECT_CLAIM = "reflect"
# Housekeeping claims: not team work, so never shown in an agent's awareness block.
BACKGROUND_CLAIMS = frozenset({DIGEST_CLAIM, REFLECT_CLAIM})

STATS_MESSAGES = 2000  # messages beyond the window read for word statistics and rebuilds
RECOMPACT_EVERY = 10  # folds of a model digest into itself drift: rebuild from sources this often
MODEL_SOURCE_TOKENS = 6000  # messages a model is shown for one compaction, newest first
LINE_TOKENS = 15  # a model line's expected size: max_lines = budget // LINE_TOKENS


def resolve_mode(settings: Settings, model: ChatModel | None) -> str:
    """``extractive`` or ``model``, from ``HUB_DIGEST_MODE``.

    ``auto`` asks the model only when ``HUB_MODEL`` names one: the embedded local model
    is too slow (and too small) to compact in the background of a chat.
    """
    if settings.digest_mode == "extractive" or model is None:
        return "extractive"
    if settings.digest_mode == "model":
        return "model"
    return "model" if settings.model else "extractive"


@dataclass(frozen=True, slots=True)
class DigestSection:
    """What one call gets of the digest, and how it got it."""

    text: str = ""
    path: str = "none"  # cached | incremental | full | full_recompact | none
    age: int = 0  # messages that left the window since the digest was made
    version: int = 0
    lines: int = 0

    def record(self, tokens: int) -> dict[str, Any]:
        """The call record's ``extra["digest"]``."""
        return {"path": self.path, "age": self.age, "version": self.version, "tokens": int(tokens)}


@dataclass
class CompactionReport:
    """What one compaction attempt did."""

    scope: str
    outcome: str  # off | not_due | busy | compacted | failed
    kind: str | None = None
    version: int = 0
    lines: int = 0
    rejected: int = 0
    reason: str = ""
    usage: dict[str, int] = field(default_factory=dict)


class _Plan(NamedTuple):
    """A due compaction, as read from the store: the digest, its kind and the messages it folds."""

    digest: Digest | None
    made: bool  # a digest exists (a broken row is rebuilt like none)
    kind: str  # full | full_recompact | incremental
    previous: Sequence[DigestLine]
    left: list[Message]  # the messages beyond the window (no commands; for a model's fold, only those after the digest)
    pending: list[Message]  # those after the digest
    newest: int  # the id the digest will cover up to


class _Failure(Exception):
    """A compaction that keeps the cached digest (the reason is counted and logged)."""


class _Unusable(_Failure):
    """The model answered, but not with lines we can keep (malformed, mostly untraceable).

    A fold that fails this way is retried once as a rebuild from the sources; a timeout or
    an error is not (the model would only be asked to fail again).
    """


class BackgroundMemoryJob:
    """What the digest and reflection share: the store, the settings, the mode (extractive or
    model, :func:`resolve_mode`), the agent names a line may always mention, the time zone."""

    job = "memory"  # named in the error for a model mode without a model

    def __init__(
        self,
        store: Store,
        settings: Settings,
        *,
        model: ChatModel | None = None,
        tokenizer: Tokenizer | None = None,
        clock: Callable[[], float] = time.time,
        mode: str | None = None,
        names: Sequence[str] = (),
    ) -> None:
        self.store = store
        self.settings = settings
        self.model = model
        self.tokenizer = tokenizer or get_tokenizer()
        self.clock = clock
        self.mode = mode or resolve_mode(settings, model)
        if self.mode == "model" and model is None:
            raise ValueError(f"the model {self.job} mode needs a model")
        self.names = tuple(names)  # agent names: a line may always mention them
        self.zone = ZoneInfo(settings.timezone)


class DigestKeeper(BackgroundMemoryJob):
    """The scope's digest: its section for every call, and its compaction in the background."""

    job = "digest"

    @property
    def enabled(self) -> bool:
        return self.settings.digest_every > 0 and self.settings.digest_tokens > 0

    # -- the request path: read only ------------------------------------------------------------
    def section(self, scope: str, before_id: int | None = None) -> DigestSection:
        """The digest for a call on the message ``before_id``; raises on a store error (the hub fails open)."""
        if not self.enabled:
            return DigestSection()
        read = read_digest(self.store, scope, before_id=before_id, served=True)  # one round trip on PostgreSQL
        digest = read.digest
        if digest is not None and digest.broken:
            # Never shown as it stands ("1 January 1970: - 5"): the next compaction rebuilds it.
            log.warning("the digest of %s is broken (%s); answering without it until it is rebuilt", scope, digest.broken)
            return DigestSection()
        if digest is None or not digest.exists:
            return DigestSection()
        text = render_digest(digest.lines, self.tokenizer, self.settings.digest_tokens, self.zone)
        if not text:
            return DigestSection()
        path = "cached" if read.served == digest.version else digest.kind
        left = read.after - self.settings.window
        return DigestSection(text=text, path=path, age=max(0, left), version=digest.version, lines=len(digest.lines))

    # -- the background ------------------------------------------------------------------------
    def due(self, scope: str, digest: Digest | None = None) -> bool:
        """Whether at least ``HUB_DIGEST_EVERY`` messages have left the window since the last compaction.

        After a failed compaction, as many more must have left since the failure.
        """
        if not self.enabled:
            return False
        if digest is None:  # the digest and the messages after it in one round trip on PostgreSQL
            read = read_digest(self.store, scope)
            digest, after = read.digest, read.after
        else:
            after = None
        window, every = self.settings.window, self.settings.digest_every
        if digest is not None and digest.broken:
            return True  # rebuilt from the messages now, not a whole HUB_DIGEST_EVERY later
        if after is None:
            after = messages_after(self.store, scope, digest.upto_id)
        if after - window < every:
            return False
        retry_after = (digest.stats.get("retry_after") if digest else None) or 0
        if isinstance(retry_after, bool) or not isinstance(retry_after, int):
            return True  # an unreadable mark: better one attempt too many than a digest stuck for good
        return not retry_after or messages_after(self.store, scope, retry_after) - window >= every

    async def after_reply(self, scope: str, holder: str, *, due: bool | None = None) -> CompactionReport | None:
        """Compact when due; never raises (the hub calls this after the reply is sent).
        ``due``: :meth:`due` read already, in the hub's own store step."""
        try:
            return await self.compact(scope, holder, due=due)
        except Exception:
            log.exception("digest compaction failed for %s; the cached digest stays", scope)
            return None

    async def compact(self, scope: str, holder: str, *, force: bool = False, due: bool | None = None) -> CompactionReport:
        """Compact the scope's digest if due (``force``: now, rebuilding an existing one), under
        its claim. ``due``: :meth:`due` as the caller read it (else it is read here)."""
        if not self.enabled:
            return CompactionReport(scope, "off")
        # Off the event loop where the store waits on the network (scopehub.hub.dbwork).
        if due is None and not force:
            due = await in_db_thread(self.store, self.due, scope)
        if not force and not due:
            return CompactionReport(scope, "not_due")
        # Renewed while the compaction runs (a slow model outlasts any TTL fixed in advance);
        # the digest's expect_version is the compare-and-set behind it.
        lease = ClaimLease(
            self.store, scope, DIGEST_CLAIM, holder, note="hub: compacting the digest", ttl=self.settings.claim_ttl, clock=self.clock,
            run=partial(in_db_thread, self.store),
        )
        async with lease:
            if not lease.held:
                log.info("digest of %s is being compacted by another worker; skipping", scope)
                return CompactionReport(scope, "busy")
            return await self._compact(scope, force)

    def _left(self, scope: str, after: int = 0) -> list[Message]:
        """The newest ``STATS_MESSAGES`` messages that have left the window, oldest first
        (with ``after``, only those of them after that id)."""
        window = self.settings.window
        recent = self.store.window(scope, window + STATS_MESSAGES, after=after)
        return recent[:-window] if len(recent) > window else []

    def _lost_sources(self, scope: str, digest: Digest) -> bool:
        ids = sorted({i for line in digest.lines for i in line.sources})
        if not ids:
            return False
        marks = ",".join("?" * len(ids))
        found = self.store.query(f"SELECT count(*) FROM messages WHERE scope = ? AND id IN ({marks})", (scope, *ids))[0][0]
        return found < len(ids)

    def _plan(self, scope: str, force: bool) -> _Plan | CompactionReport:
        """What a compaction reads before it asks anything: its kind and messages, or why not.

        Store work only (the digest, up to HUB_WINDOW + STATS_MESSAGES messages, their
        sources), so it runs in one step off the event loop where the store waits on the
        network: in a long scope the read alone held every other chat of the worker."""
        digest = get_digest(self.store, scope)  # again: another worker may have just finished
        if not force and not self.due(scope, digest):
            return CompactionReport(scope, "not_due")
        made = digest is not None and digest.exists  # a broken row is rebuilt like no digest at all
        upto = digest.upto_id if made and digest else 0
        if not made or digest is None:
            kind = "full"
        elif (
            force
            or digest.folds + 1 >= RECOMPACT_EVERY
            or digest.mode != self.mode  # an extractive fallback, rebuilt by the model when it answers again
            or self._lost_sources(scope, digest)
        ):
            kind = "full_recompact"
        else:
            kind = "incremental"
        # The model folds only the messages after the digest into it: the older ones it
        # would read (up to STATS_MESSAGES, for the extractive digest's word statistics)
        # play no part, and in a long scope they were most of what a compaction read.
        folds_only_pending = kind == "incremental" and self.mode != "extractive"
        beyond = self._left(scope, after=upto if folds_only_pending else 0)
        left = [m for m in beyond if m.via != "command"]
        if not left:
            return CompactionReport(scope, "not_due")
        pending = [m for m in left if m.id > upto]
        if kind == "incremental" and not pending:
            return CompactionReport(scope, "not_due")
        previous = digest.lines if made and digest else ()
        return _Plan(digest, made, kind, previous, left, pending, newest=beyond[-1].id)

    async def _compact(self, scope: str, force: bool) -> CompactionReport:
        plan = await in_db_thread(self.store, self._plan, scope, force)
        if isinstance(plan, CompactionReport):
            return plan
        digest, made, kind, previous, left, pending, newest = plan
        usage = {"model_calls": 0, "prompt_tokens": 0, "completion_tokens": 0}
        rejected = 0
        mode, fallback = self.mode, None
        try:
            if self.mode == "extractive":
                lines = await asyncio.to_thread(self._extractive, kind, previous, left, pending)
            else:
                lines, kind, rejected = await self._by_model(scope, kind, previous, left, pending, usage)
        except _Failure as failure:
            reason = str(failure)
            if made:
                log.warning("digest compaction of %s kept the cached digest: %s", scope, reason)
                await in_db_thread(self.store, self._record_failure, scope, reason, newest, usage)
                return CompactionReport(scope, "failed", kind, reason=reason, usage=usage)
            # No digest to keep: the agents would get nothing about the older history. The
            # extractive digest (the messages' own sentences, no model) stands in until the
            # model answers again (seed 003: the cached digest, else the raw recent events).
            log.warning("digest compaction of %s failed (%s); an extractive digest stands in", scope, reason)
            kind, mode, fallback = "full", "extractive", reason
            lines = await asyncio.to_thread(self._extractive, kind, (), left, pending)
        saved = await in_db_thread(self.store, self._save, scope, lines, newest, kind, mode, usage, digest, fallback)
        if saved is None:  # another worker's compaction got there first (its claim ran out meanwhile)
            return CompactionReport(scope, "busy", kind)
        log.info("digest of %s: %s compaction (%s), version %d, %d lines", scope, kind, mode, saved.version, len(saved.lines))
        reason = f"{fallback}: an extractive digest stands in" if fallback else ""
        return CompactionReport(scope, "compacted", kind, saved.version, len(saved.lines), rejected, reason=reason, usage=usage)

    def _record_failure(self, scope: str, reason: str, newest: int, usage: dict[str, int]) -> None:
        record_digest_failure(self.store, scope, reason, retry_after=newest, usage=usage, now=self.clock())

    def _save(
        self,
        scope: str,
        lines: Sequence[DigestLine],
        newest: int,
        kind: str,
        mode: str,
        usage: dict[str, int],
        digest: Digest | None,
        fallback: str | None,
    ) -> Digest | None:
        """Save the compacted lines (compare-and-set on the version read): None when another worker's got there first."""
        covered = self.store.query("SELECT count(*) FROM messages WHERE scope = ? AND id <= ?", (scope, newest))[0][0]
        return save_digest(
            self.store,
            scope,
            lines,
            upto_id=newest,
            covered=covered,
            kind=kind,
            mode=mode,
            now=self.clock(),
            usage=usage,
            expect_version=digest.version if digest else 0,
            failure=fallback,
        )

    # -- extractive ----------------------------------------------------------------------------
    def _extractive(
        self, kind: str, previous: Sequence[DigestLine], left: Sequence[Message], pending: Sequence[Message]
    ) -> list[DigestLine]:
        salience = Salience().add(m.text for m in left)
        budget = self.settings.digest_tokens
        if kind == "incremental":
            return extractive_digest(pending, previous, salience, tokenizer=self.tokenizer, budget=budget, zone=self.zone)
        return extractive_digest(left, (), salience, tokenizer=self.tokenizer, budget=budget, zone=self.zone)

    # -- by model ------------------------------------------------------------------------------
    def _newest_within(self, messages: Sequence[Message], tokens: int) -> list[Message]:
        chosen: list[Message] = []
        spent = 0
        for message in reversed(messages):
            cost = self.tokenizer.count(message.text) + 12
            if chosen and spent + cost > tokens:
                break
            chosen.append(message)
            spent += cost
        return chosen[::-1]

    def _sources_of(self, scope: str, lines: Sequence[DigestLine]) -> list[Message]:
        ids = sorted({i for line in lines for i in line.sources})
        found = [self.store.get(scope, i) for i in ids]
        return [m for m in found if m is not None]

    async def _by_model(
        self,
        scope: str,
        kind: str,
        previous: Sequence[DigestLine],
        left: Sequence[Message],
        pending: Sequence[Message],
        usage: dict[str, int],
    ) -> tuple[list[DigestLine], str, int]:
        rejected = 0
        if kind == "incremental":
            # After a long pause (failures, an import) only the newest pending messages fit the
            # prompt; the older ones are passed over (the digest moves on; search still finds them).
            new = self._newest_within(pending, MODEL_SOURCE_TOKENS)
            shown = {m.id: m for m in [*await in_db_thread(self.store, self._sources_of, scope, previous), *new]}
            try:
                lines, rejected, over = await self._ask(previous, new, shown, rebuild=False, usage=usage)
                if not over:
                    return lines, kind, rejected
                log.info("digest fold of %s came out over budget; rebuilding from sources", scope)
            except _Unusable as failure:
                log.info("digest fold of %s failed (%s); rebuilding from sources", scope, failure)
            kind = "full_recompact"
        if kind == "full":
            sources = self._newest_within(left, MODEL_SOURCE_TOKENS)
        else:
            merged = {m.id: m for m in [*await in_db_thread(self.store, self._sources_of, scope, previous), *pending]}
            sources = self._newest_within([merged[i] for i in sorted(merged)], MODEL_SOURCE_TOKENS)
        lines, more, _ = await self._ask((), sources, {m.id: m for m in sources}, rebuild=True, usage=usage)
        return lines, kind, rejected + more

    async def _ask(
        self,
        previous: Sequence[DigestLine],
        messages: Sequence[Message],
        shown: dict[int, Message],
        *,
        rebuild: bool,
        usage: dict[str, int],
    ) -> tuple[list[DigestLine], int, bool]:
        """One model call: (lines within budget, lines rejected, whether the answer was over budget)."""
        assert self.model is not None
        budget = self.settings.digest_tokens
        prompt = compaction_messages(
            previous, messages, budget=budget, max_lines=max(1, budget // LINE_TOKENS), zone=self.zone, rebuild=rebuild
        )
        timeout = self.settings.digest_timeout
        usage["model_calls"] += 1
        try:
            response = await asyncio.wait_for(self.model.complete(prompt, json_mode=True, timeout=timeout), timeout)
        except TimeoutError as exc:
            raise _Failure(f"the model took longer than {timeout:g} s") from exc
        except Exception as exc:  # any model failure keeps the cached digest
            raise _Failure(f"the model failed: {type(exc).__name__}: {exc}") from exc
        usage["prompt_tokens"] += int(response.prompt_tokens or 0)
        usage["completion_tokens"] += int(response.completion_tokens or 0)
        items = parse_items(response.content, "lines")
        if items is None:
            raise _Unusable("the model's answer was not the JSON asked for")
        sources = {str(i): SourceText(m.text, speaker(m), m.ts) for i, m in shown.items()}
        checked = check_items(items, sources, zone=self.zone, names=self.names)
        if checked.mostly_rejected:
            example = checked.rejected[0] if checked.rejected else ("", "no lines")
            raise _Unusable(f"{len(checked.rejected)} of {len(items)} lines untraceable, e.g. {example[0]!r}: {example[1]}")
        count = len(checked.kept)
        lines = [
            DigestLine(
                text=item["text"],
                sources=tuple(sorted(int(k) for k in item["source_keys"])),
                ts=max(shown[int(k)].ts for k in item["source_keys"]),
                score=1.0 - index / count,  # the model puts the most important first
            )
            for index, item in enumerate(checked.kept)
        ]
        fitted = fit_lines(lines, self.tokenizer, budget, self.zone)
        over = self.tokenizer.count(render_lines(lines, self.zone)) > budget
        return fitted, len(checked.rejected), over
