"""Daily token and cost budgets per person and per group, through PTB's real client."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from scopehub.hub import Deps, Hub, load_settings
from scopehub.hub.budgets import day_start
from scopehub.hub.models import LiteLLMModel
from scopehub.hub.models.testing import FunctionModel
from scopehub.memory import Store
from tests.fakes.openai_server import FakeOpenAI, text
from tests.helpers import registry_of
from tests.hub.telegram_helpers import NOTES, TOKEN, bot_run, echo

NOON = day_start(1_767_268_800.0, "Europe/Berlin") + 12 * 3600  # 2026-01-01 12:00 in Berlin


def budget_hub(db: Path, model: Any, clock: list[float], **settings: Any) -> Hub:
    config = load_settings(db=db, telegram_bot_token=TOKEN, timezone="Europe/Berlin", router_embedder="none", **settings)
    return Hub(Deps(store=Store(db), settings=config, model=model, clock=lambda: clock[0]), registry_of(NOTES))


def test_a_spent_token_budget_stops_model_calls_with_a_clear_message_until_midnight(tmp_path: Path) -> None:
    clock = [NOON]
    model = FunctionModel(echo)
    hub = budget_hub(tmp_path / "hub.db", model, clock, daily_tokens_user=40, daily_tokens_group=10_000)

    async def scenario(hub, tg, bot) -> None:
        tg.push_message(42, "add buy milk to my tasks")  # this call sends 46 tokens
        await tg.await_sent(1, chat_id=42)
        tg.push_message(42, "and eggs")
        refused = (await tg.await_sent(2, chat_id=42))[1]["text"]
        assert refused.startswith("You have used today's budget of 40 tokens (")
        assert "resets at midnight (Europe/Berlin), in 12 h 0 min" in refused
        tg.push_message(42, "/usage")  # commands still work, and say where the day stands
        usage = (await tg.await_sent(3, chat_id=42))[2]["text"]
        assert "Today (Europe/Berlin):" in usage and "of the daily budget of 40 tokens" in usage
        tg.push_message(-100, "@hub_test_bot add milk to our tasks", user_id=42)  # a group has its own budget
        assert (await tg.await_sent(1, chat_id=-100))[0]["text"].startswith("[tasks]")
        clock[0] += 12 * 3600 + 60  # past midnight in Berlin: a new day
        tg.push_message(42, "add bread to my tasks")
        assert (await tg.await_sent(4, chat_id=42))[3]["text"].startswith("[tasks]")

    bot_run(tmp_path, scenario, hub=hub)
    assert [m[-1]["content"] for m in (c.messages for c in model.calls)] == [
        "add buy milk to my tasks",
        "Test: add milk to our tasks",
        "add bread to my tasks",
    ]  # "and eggs" cost no model call
    with Store(tmp_path / "hub.db") as store:
        assert "and eggs" in [m.text for m in store.messages("user:42")]  # it is saved all the same


def test_a_spent_cost_budget_of_a_group_counts_the_provider_price(tmp_path: Path) -> None:
    clock = [NOON]
    with FakeOpenAI(default=lambda request: text("Added.")) as llm:
        model = LiteLLMModel("openai/gpt-4o-mini", api_base=llm.base_url, api_key="sk-fake")
        hub = budget_hub(tmp_path / "hub.db", model, clock, daily_cost_group=0.00001, stream="off")

        async def scenario(hub, tg, bot) -> None:
            tg.push_message(-100, "@hub_test_bot add milk to our tasks", user_id=7)
            # The first price is litellm's map: its import takes seconds on a loaded machine.
            await tg.await_sent(1, chat_id=-100, timeout=60)
            tg.push_message(-100, "@hub_test_bot and eggs", user_id=8)
            refused = (await tg.await_sent(2, chat_id=-100))[1]["text"]
            assert refused.startswith("This group has used today's budget of $0.00 (") and "$0.0000" in refused
            tg.push_message(42, "add milk to my tasks")  # a person's own chats are not the group's
            assert (await tg.await_sent(1, chat_id=42))[0]["text"] == "[tasks]\nAdded."

        bot_run(tmp_path, scenario, hub=hub)
        assert len(llm.requests) == 2
