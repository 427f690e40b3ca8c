"""Token replay: what scoping saves, and what it costs in lost references, on dialogue data.

``agents-hub eval tokens --format multiwoz|sgd|jsonl PATH [--chain K] [--routes gold|predicted]``

K dialogues in a row form one customer's chat (one scope). Every user turn is routed
(``predicted``: the real local router, :func:`hub.router.route`; ``gold``: the dataset's
label, and a turn without one stays with the current agent, or ``general`` at the start)
and stored with that tag; every system turn is stored as the reply of the agent that
handled the preceding user turn. ``also_sees`` comes from the router in both cases (for
gold routes: the log's own ``also_sees`` annotation when it has one, else the router's
local prediction for the gold agent). Without ``--train``, the predicted router's
examples are cross-fitted: chats are split into two folds by position and each fold is
routed by a router whose examples (at most 50 per agent) come from the other fold. For each user turn the agent's call is then built by
the real context builder (:func:`hub.context.build_context`) in seven modes:

``full``
    the last ``window`` messages whatever their tag (what an unscoped hub sends);
``scoped_no_also``
    the scoping rules without ``also_sees``: window first, tag filter, plus the tail;
``scoped``
    the same with the router's ``also_sees`` (the hub's behaviour);
``filter_first``
    the known pitfall: the *whole* history filtered by tag (agent and ``also_sees``)
    first, then its last ``window`` messages, plus the tail;
``oracle``
    only the messages the answer needs (the sources of the turn's references, see
    below) plus the tail: a lower bound;
``scoped_awareness``
    ``scoped`` plus the awareness block the hub would show (the other agents' annotated
    system acts as events, see :mod:`eval.awareness_replay`);
``awareness_no_also``
    the awareness block instead of ``also_sees``: ``scoped_no_also`` plus the block.

The request of a call is the agent's fixed prompt (persona, hub rules, tool schemas of
:func:`hub.context.agent_prompt`; ``search_memory`` when :func:`hub.context.wants_archive`
offers it, the same offer in every mode), facts (none in a replay), history and the
message. A dataset domain becomes an agent with :func:`domain_agent` (three tools plus
``search_memory``, comparable with the hub's real agents); a name the hub's registry knows
(``general``) uses the real agent. ``saving`` figures are ``1 - mode / full`` over the
sums of all calls.

References and how their recall is measured: see :mod:`eval.references`.

The predicted routes come from the hub's own router (``--embedder``, default
``HUB_ROUTER_EMBEDDER``), each message at its time (a message after half an hour of
silence opens a new conversation); the frozen test part of the dev data
(``eval/data/frozen.json``) is left out, and ``--frozen`` replays it alone.

``--judge`` asks the agent's model for each reference's value with the scoped and with
the full context (see :mod:`eval.judge`).
"""

from ..judge import JudgeItem
from ..references import Reference, find_references, normalize_value
from .agents import CachingTokenizer, agent_prompts, domain_agent
from .chat import ClassifierFor, message_times, replay, replay_folds
from .command import print_summary, tokens_command
from .prepare import Prepared, load_dialogues, prepare
from .result import MODES, ModeTotals, ReplayResult, fold_figures, merge_results

__all__ = [
    "MODES",
    "CachingTokenizer",
    "ClassifierFor",
    "JudgeItem",
    "ModeTotals",
    "Prepared",
    "Reference",
    "ReplayResult",
    "agent_prompts",
    "domain_agent",
    "find_references",
    "fold_figures",
    "load_dialogues",
    "merge_results",
    "message_times",
    "normalize_value",
    "prepare",
    "print_summary",
    "replay",
    "replay_folds",
    "tokens_command",
]
