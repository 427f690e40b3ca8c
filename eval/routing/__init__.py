"""Routing evaluation: the local router (zero LLM tokens) on public dialogue data.

``agents-hub eval routing --format clinc|sgd|multiwoz PATH --train TRAIN_PATH --json OUT``

Agents are built from the dataset's domains (one agent per domain, see
:func:`eval.loaders.agent_name`):

- descriptions come from the schema where the dataset has one (SGD ``schema.json`` beside
  PATH); CLINC150 has none, so a domain is described by its name and its intent names;
  MultiWOZ has none either, so a domain is described by its name and the slot names its
  training turns annotate;
- at most ``--examples`` (50) example utterances per agent come from TRAIN_PATH's user
  turns, chosen deterministically: half where the agent first appears in a dialogue, half
  from its later turns (see :func:`dialogue_examples` and :func:`sample_examples`); a
  domain without training examples relies on its description;
- CLINC150 also gets the hub's ``general`` agent (its real description and examples, plus
  out-of-scope training utterances when the train file has them), so that out-of-scope
  messages have somewhere to go.

Every user turn of PATH is routed in conversation order with the window of the
dialogue's previous turns (user turns tagged with the predicted agent, system turns with
the agent that handled the preceding user turn), exactly as the hub stores them. A turn
with several gold agents (SGD frames) is right if the prediction is any of them. A turn
without a gold label (MultiWOZ chit-chat) is still routed, so stickiness sees it as it
would in production, but it is left out of every metric. CLINC150 messages are
independent: each is routed with an empty window.

When TRAIN_PATH is PATH for SGD or MultiWOZ (no separate training split at hand), the
dialogues whose id hashes (CRC-32) to 0 modulo 5 give the examples and only the other
four fifths are evaluated, so no evaluated turn is ever an example. CLINC150 keeps its
splits apart with ``--split`` (default ``val``) and ``--train-split`` (default ``train``).

Metrics: ``accuracy``; ``macro_f1`` over every label seen in gold or predictions (as
scikit-learn does, so an agent that only steals turns counts with F1 0); the confusion
table ``gold -> predicted -> count`` (a right multi-label turn counts on the diagonal);
``p50_ms``/``p95_ms`` of one ``route()`` call including its ``also_sees`` prediction;
``llm_tokens`` (0: the local router calls no model).

The router is the hub's own (``hub.routing.defaults.build_router``): ``--embedder``
defaults to ``HUB_ROUTER_EMBEDDER`` (``auto``: the embedder when the ``semantic`` extra is
installed), with that setting's gate and weights, and the report names the configuration
it ran (``router``, ``configuration``). The frozen test part of the dev data
(``eval/data/frozen.json``, :mod:`eval.holdout`) is left out of the routed turns and the
examples; ``--frozen`` routes it alone. With an embedder the latencies include embedding
each new message; ``embed_p50_ms``/``embed_p95_ms`` give the embedding
calls alone and ``build_s`` the time to build the router (embedding every example).
``cpu_p50_ms``/``cpu_p95_ms`` are the same routing calls in CPU time (``time.process_time``):
on a loaded machine the wall time also holds the wait for a core.
"""

from .command import print_report, routing_command
from .labelled import labelled_conversations, load_labelled, run_labelled
from .metrics import (
    RoutingResult,
    agent_folds,
    format_spread,
    hide_examples,
    routing_metrics,
    split_train,
    spread,
    summarize,
    unseen_metrics,
)
from .profiles import (
    GENERAL,
    MAX_EXAMPLES,
    build_profiles,
    clinc_profiles,
    dialogue_examples,
    example_candidates,
    general_profile,
    hub_profiles,
    sample_examples,
    slot_descriptions,
)
from .router import RouterOptions, build_classifier, embedding_figures
from .runs import evaluate_routing, route_all, run_clinc, run_dialogues

__all__ = [
    "GENERAL",
    "MAX_EXAMPLES",
    "RouterOptions",
    "RoutingResult",
    "agent_folds",
    "build_classifier",
    "build_profiles",
    "clinc_profiles",
    "dialogue_examples",
    "embedding_figures",
    "evaluate_routing",
    "example_candidates",
    "format_spread",
    "general_profile",
    "hide_examples",
    "hub_profiles",
    "labelled_conversations",
    "load_labelled",
    "print_report",
    "route_all",
    "routing_command",
    "routing_metrics",
    "run_clinc",
    "run_dialogues",
    "run_labelled",
    "sample_examples",
    "slot_descriptions",
    "split_train",
    "spread",
    "summarize",
    "unseen_metrics",
]
