"""Daily budgets: how many tokens and dollars a private chat (a person) or a group may spend a day.

``HUB_DAILY_TOKENS_USER`` / ``HUB_DAILY_COST_USER`` bound each person's own memory
(``user:<id>``, their private chats), ``HUB_DAILY_TOKENS_GROUP`` / ``HUB_DAILY_COST_GROUP``
each group; 0 means no limit. Every model call of the scope counts (the agents', the LLM
router's, fact extraction's), with the tokens the provider reported (else the tokens sent)
and the cost litellm's price list gives. The day starts at midnight in the chat's time zone
(its /settings, else ``HUB_TIMEZONE``). Once a budget is spent, a message is still stored,
but answered with :func:`budget_refusal`'s words instead of a model call; commands still work.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

from scopehub.hub.settings import Settings
from scopehub.hub.wording import plural
from scopehub.memory import Spending, Store, spending_since

__all__ = ["Budget", "budget_for", "budget_line", "budget_refusal", "day_start"]


@dataclass(frozen=True, slots=True)
class Budget:
    """A scope's daily allowance (0: no limit on that count)."""

    tokens: int = 0
    cost: float = 0.0

    @property
    def limited(self) -> bool:
        return self.tokens > 0 or self.cost > 0

    def spent(self, used: Spending) -> bool:
        """Whether ``used`` reaches the allowance."""
        return (self.tokens > 0 and used.tokens >= self.tokens) or (self.cost > 0 and (used.cost or 0.0) >= self.cost)

    def describe(self) -> str:
        parts = ([f"{self.tokens:,} tokens"] if self.tokens else []) + ([f"${self.cost:.2f}"] if self.cost else [])
        return " and ".join(parts)


def budget_for(settings: Settings, scope: str) -> Budget:
    """The daily budget of a private chat's person (``user:``) or of a group."""
    if scope.startswith("group:"):
        return Budget(settings.daily_tokens_group, settings.daily_cost_group)
    return Budget(settings.daily_tokens_user, settings.daily_cost_user)


def day_start(now: float, timezone: str) -> float:
    """The last midnight before ``now`` in ``timezone`` (unix seconds)."""
    zone = ZoneInfo(timezone)
    local = datetime.fromtimestamp(now, zone)
    return local.replace(hour=0, minute=0, second=0, microsecond=0).timestamp()


def _resets_in(now: float, timezone: str) -> str:
    zone = ZoneInfo(timezone)
    midnight = datetime.fromtimestamp(day_start(now, timezone), zone) + timedelta(days=1)
    minutes = max(1, math.ceil((midnight.timestamp() - now) / 60))
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes} min" if hours else f"{minutes} min"


def _spent_text(used: Spending) -> str:
    cost = f", ${used.cost:.4f}" if used.cost is not None else ""
    return f"{plural(used.tokens, 'token')}{cost} in {plural(used.calls, 'model call')}"


def budget_refusal(store: Store, settings: Settings, scope: str, *, now: float, timezone: str) -> str | None:
    """What to answer instead of a model call once the scope's daily budget is spent; None while it is not."""
    budget = budget_for(settings, scope)
    if not budget.limited:
        return None
    used = spending_since(store, scope, day_start(now, timezone))
    if not budget.spent(used):
        return None
    whose = "This group has" if scope.startswith("group:") else "You have"
    return (
        f"{whose} used today's budget of {budget.describe()} ({_spent_text(used)}), so I won't ask the model again today. "
        f"Your message is saved; the budget resets at midnight ({timezone}), in {_resets_in(now, timezone)}. "
        "Commands like /usage and /search still work."
    )


def budget_line(store: Store, settings: Settings, scope: str, *, now: float, timezone: str) -> str:
    """Today's spending for /usage, against the daily budget when there is one."""
    used = spending_since(store, scope, day_start(now, timezone))
    budget = budget_for(settings, scope)
    against = f" of the daily budget of {budget.describe()}" if budget.limited else ""
    return f"Today ({timezone}): {_spent_text(used)}{against}."
