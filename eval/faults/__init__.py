"""Faults and hostile input: nothing lost, nothing duplicated, nothing leaked, nothing crashes.

``agents-hub eval faults [--json OUT] [--quick] [--seed N] [--scenario NAME ...]``

Each scenario is a library function returning an :class:`Outcome`. The test suite runs
small versions (``tests/test_faults.py``); the command runs the heavy ones:

``crash_import``
    the real ``agents-hub import`` of 10,000 messages in a child process, SIGKILLed at
    random points (20 times, some during start-up): after each restart the file passes
    ``integrity_check`` and every message another connection saw committed before the
    kill is there exactly once, unaltered; a final run completes the rest.
``crash_handle``
    a child process handles 10,000 messages of 20 chats through ``Hub.handle`` (fast fake
    model) and prints each one once ``handle`` returned (acknowledged). It is SIGKILLed
    at random points (20 times) and restarted with every unacknowledged message re-sent
    plus the last acknowledged ones of each chat (at-least-once delivery, same ext_id):
    acknowledged messages and their replies are there exactly once; the last run
    completes the rest.
``concurrency`` / ``concurrency_litellm``
    50 chats x 40 messages submitted at once, interleaved across chats, to a model with
    random latency (0-20 ms: a ``FunctionModel``, or the loopback OpenAI fake through the
    real litellm client), while a second process imports into the same file: order kept
    per chat, one reply per message, no "database is locked".
``first_open``
    several processes opening a new database file at the same moment (a bot and an
    import started together): each one opens it, the file passes ``integrity_check``.
``model_faults``
    the loopback OpenAI fake through ``LiteLLMModel``: timeouts, 429 with Retry-After,
    500s, malformed bodies, a junk / slow / failing LLM router, tool calls with bad
    arguments or to unknown tools, an endless tool loop. Each must give a clear reply
    within a bound (measured) with the person's message stored.
``hostile_input``
    hypothesis-generated text through the router, the LLM router's prompt and parser,
    the context builder, the store and every search method (beyond 5,000 texts each
    text goes to one method in turn), the fact functions and, every tenth text, the hub
    itself (plain messages, /remember, /forget, /search, fact extraction); plus one
    100,000-character message: stored whole, the model gets it trimmed to its budget.
``isolation``
    100 scopes with the same words and a different secret each: no search (every
    method), fact, context, task, reminder, note, email, tool or command returns or
    changes another scope's data; a group never sees a member's private facts.
``fail_open``
    search raising, the facts block raising, fact extraction raising: the agent still
    answers without that part of its context, and the failure is logged.
``memory_tables``
    each memory table (claims, events, cursors, channels, lessons, feedback, digests,
    reflections, facts) unusable in turn under a running hub, on SQLite and PostgreSQL:
    every message answered once (the answer claim fails open too), the failure logged,
    the operator's commands one line each, never a traceback (:mod:`.tables`).
``digest_rows``
    the model's compaction answer not the JSON asked for, then the stored digest row
    corrupt or wrong-shaped in seven ways, on SQLite and PostgreSQL: the extractive digest
    stands in, a broken row is never sent, every command reads it, the next compaction
    rebuilds it (:mod:`.tables`).
``reflection_ttl``
    reflection runs outlasting their claim's TTL, three worker processes (one with its
    clock 901 s ahead): no episode kept twice or lost (:mod:`.background`).
``busy_scope``
    a backlog and a burst of events before every call: the live claim and the newest item
    lead the awareness block, the pin stays, nothing passed over uncounted or shown
    again (:mod:`.busy`).
``worker_kills``
    three real webhook workers on one PostgreSQL database answer chats that keep writing,
    behind a round-robin dispatcher that re-posts what a worker refused; one worker is
    SIGKILLed 10 times (and restarted), PostgreSQL is restarted once mid-run, reminders
    fall due throughout: no message lost, answered twice or out of order, no reminder
    fired twice (:mod:`.workers`; skipped, with the reason, without a server).
``database_outage``
    webhook workers (one, then three) on PostgreSQL while the server is stopped for 5,
    45 and 120 s: every worker answers 503 (updates and ``/healthz``) within 2 s of the
    stop and serves again within 2 s of the server's return, no message lost or answered
    twice (:mod:`.outage`; it needs the embedded server, which it can stop).

Each scenario reports what it *verified*, in its own units (``verified``: unit -> count;
a count says what was checked and found right, never what was planned): SIGKILLs
survived (the file reopened clean and every committed message was there), messages
verified present exactly once (and answered once), messages answered once in order, the
second writer's messages verified present, simultaneous first opens, model faults
answered, hostile texts tried, scope pairs checked, failures answered and logged. Units
differ, so there is no grand total. Then what went wrong, per scenario: ``lost`` (a
stored message, reply or text missing or altered), ``duplicated`` (stored or answered
twice), ``leaked`` (another scope's data returned or changed), ``crashed`` (an exception
escaped, no clear reply within the bound, or another promise of the scenario broke:
``notes`` says which). Each of those must be 0 in every scenario; the command exits with
status 1 otherwise.

Hostile text comes from hypothesis (:func:`hostile_text`): ``@given(hostile_text())``
with ``settings(max_examples=N, deadline=None, database=None, phases=[Phase.generate])``
and ``@seed(N)``, called as a plain function. Every target runs inside the body under its
own ``try``, so a failure is counted and the run goes on (no shrinking, no stop at the
first failure). The loopback OpenAI fake is the test suite's (``tests/fakes``): the
scenarios that use it need a source checkout.

Layout: one module per family of scenarios (``crashes``, ``concurrency``, ``model``,
``hostile``, ``isolation``, ``fail_open``, ``tables``, ``coordination``, ``background``,
``busy``, ``workers``, ``outage``, ``maildir``; ``_backends`` runs one on SQLite and PostgreSQL),
each with its ``SCENARIOS``; ``_outcome`` (what a scenario reports), ``_harness`` (the
pieces they share) and ``_suite`` (the registry, the run, the report, the command).
"""

from ._harness import echo_model, make_hub
from ._outcome import (
    ANSWERED_ONCE,
    COUNTS,
    FAILURES_ANSWERED,
    FAULTS_ANSWERED,
    FIRST_OPENS,
    HOSTILE_TRIED,
    HUGE_KEPT,
    IN_ORDER,
    ITEMS_UNCHANGED,
    KILLS_SURVIVED,
    PRESENT_ONCE,
    SCOPE_PAIRS,
    WRITER_PRESENT,
    Outcome,
    Scenario,
)
from ._suite import REGISTRY, SCENARIOS, faults_command, format_faults, run_faults
from .background import reflection_ttl
from .busy import busy_scope
from .concurrency import concurrency, first_open
from .coordination import event_cursors, two_processes
from .crashes import crash_handle, crash_import
from .fail_open import fail_open
from .hostile import HostileProbe, hostile_input, hostile_text, huge_message
from .isolation import isolation
from .model import FaultCase, fault_cases, model_faults
from .outage import database_outage
from .tables import digest_rows, memory_tables
from .workers import worker_kills

__all__ = [
    "ANSWERED_ONCE",
    "COUNTS",
    "FAILURES_ANSWERED",
    "FAULTS_ANSWERED",
    "FIRST_OPENS",
    "HOSTILE_TRIED",
    "HUGE_KEPT",
    "IN_ORDER",
    "ITEMS_UNCHANGED",
    "KILLS_SURVIVED",
    "PRESENT_ONCE",
    "REGISTRY",
    "SCENARIOS",
    "SCOPE_PAIRS",
    "WRITER_PRESENT",
    "FaultCase",
    "HostileProbe",
    "Outcome",
    "Scenario",
    "busy_scope",
    "concurrency",
    "crash_handle",
    "crash_import",
    "database_outage",
    "digest_rows",
    "echo_model",
    "event_cursors",
    "fail_open",
    "fault_cases",
    "faults_command",
    "first_open",
    "format_faults",
    "hostile_input",
    "hostile_text",
    "huge_message",
    "isolation",
    "make_hub",
    "memory_tables",
    "model_faults",
    "reflection_ttl",
    "run_faults",
    "two_processes",
    "worker_kills",
]
