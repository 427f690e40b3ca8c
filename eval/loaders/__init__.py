"""Dataset loaders: public dialogue datasets as plain, immutable turns.

Pure functions over files. Every loader reads plain ``.json`` and gzip ``.json.gz``
(detected by content, so a misnamed file still loads; a path whose ``.gz`` twin exists
is found either way). A file of the wrong shape raises :class:`DatasetFormatError`
naming the file and what was expected.

Agent names: a dataset's domain becomes an agent name with :func:`agent_name`
(``"Restaurant"`` -> ``"restaurant"``, ``"Restaurants_1"`` -> ``"restaurants"``).
MultiWOZ ``general`` and ``Booking`` acts name no agent of their own. A system turn
without a domain act inherits the previous user turn's agents; a booking step after a
user turn annotated with no domain ("There are 3 of us") takes the dialogue's most recent
agents, since a booking always belongs to the domain being booked.

Slots are filled for both roles (what the system offers is what later turns refer to);
filter on ``Turn.role`` for user-only values. System turns also keep their dialogue acts
(``Turn.acts``: MultiWOZ ``dialog_act`` entries, SGD frame actions) with their values, in
the annotation's order; a MultiWOZ ``Booking`` act takes the turn's domain. In an SGD turn with several frames the
service the user turns to (the frame with ``INFORM_INTENT``) comes first; MultiWOZ keeps
the annotation's order.
"""

from ._base import (
    GENERAL,
    Act,
    DatasetFormatError,
    Dialogue,
    LocomoConversation,
    LocomoQuestion,
    PathLike,
    Slot,
    Turn,
    agent_name,
)
from .chatlog import TURN_SPACING_S, load_jsonl, to_records
from .clinc import clinc_domains, load_clinc
from .locomo import LOCOMO_TURN_SPACING_S, load_locomo
from .multiwoz import load_multiwoz
from .sgd import load_sgd, load_sgd_schema

__all__ = [
    "GENERAL",
    "LOCOMO_TURN_SPACING_S",
    "TURN_SPACING_S",
    "Act",
    "DatasetFormatError",
    "Dialogue",
    "LocomoConversation",
    "LocomoQuestion",
    "PathLike",
    "Slot",
    "Turn",
    "agent_name",
    "clinc_domains",
    "load_clinc",
    "load_jsonl",
    "load_locomo",
    "load_multiwoz",
    "load_sgd",
    "load_sgd_schema",
    "to_records",
]
