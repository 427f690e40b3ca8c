"""A priced hosted model's calls cost what litellm says, and a start does not import litellm
to hear it again: its rate card is remembered beside the unpriced models (``HUB_PRICE_CACHE``)."""

from __future__ import annotations

import json
import random
import re
import subprocess

from scopehub.hub.models.litellm_model import import_litellm
from scopehub.hub.models.pricing import _rate_card
from tests.helpers import checkout_env, checkout_python


def test_a_priced_models_rate_card_is_used_by_later_processes_that_never_import_litellm(tmp_path):
    code = """
import sys
from scopehub.hub.models import price_call
prices = [price_call("openai/gpt-4o-mini", p, c, r) for p, c, r in ((2000, 10, 0), (2000, 10, 1024), (98765, 4321, 50003))]
print(repr(prices), "litellm" in sys.modules)
"""
    env = checkout_env(tmp_path, {"PATH": "/usr/bin:/bin", "HUB_PRICE_CACHE": str(tmp_path / "prices.json"), "LITELLM_LOCAL_MODEL_COST_MAP": "True"})
    first = subprocess.run(checkout_python(code), capture_output=True, text=True, env=env, timeout=120)
    second = subprocess.run(checkout_python(code), capture_output=True, text=True, env=env, timeout=120)
    assert first.returncode == 0 and second.returncode == 0, first.stderr + second.stderr
    *prices, imported = first.stdout.split(" ")
    *again, imported_again = second.stdout.split(" ")
    assert imported.strip() == "True" and imported_again.strip() == "False"
    assert again == prices  # the same costs and billed tokens, to the last digit
    assert "Price(cost=None" not in " ".join(prices)
    (entry,) = json.loads((tmp_path / "prices.json").read_text())["versions"].values()
    assert "openai/gpt-4o-mini" in entry["rates"]


def _map_models(litellm, count: int) -> list[str]:
    # Providers whose pricing is offline arithmetic (some others' look-ups sign in over the network).
    offline = {"openai", "anthropic", "gemini", "mistral", "groq", "deepseek", "xai", "azure", "text-completion-openai"}
    models = [
        name for name, info in litellm.model_cost.items()
        if isinstance(info, dict) and info.get("mode") == "chat" and info.get("input_cost_per_token") and info.get("litellm_provider") in offline
    ]  # fmt: skip
    return random.Random(7).sample(models, min(count, len(models)))


def test_rate_cards_price_exactly_as_litellm_does(monkeypatch):
    monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    litellm = import_litellm()
    calls = random.Random(11)
    carded = 0
    for model in _map_models(litellm, 250):
        try:  # as price_call does: a model litellm cannot price is not carded
            info = litellm.get_model_info(model)
            card = _rate_card(litellm, model, info)
        except Exception:
            continue
        if card is None:
            continue
        carded += 1
        for _ in range(6):
            prompt = calls.randrange(1, min(card.below, 400_000))
            cached, written = calls.randrange(0, prompt // 2 + 1), calls.randrange(0, prompt // 4 + 1)
            completion = calls.randrange(0, 5000)
            expected = tuple(litellm.cost_per_token(model=model, prompt_tokens=prompt, completion_tokens=completion, cache_read_input_tokens=cached, cache_creation_input_tokens=written))
            assert card.cost(prompt, completion, cached, written) == expected, (model, prompt, completion, cached, written)
    assert carded >= 100, carded  # most chat models price per token


def _first_tier(info) -> int | None:
    tiers = [int(m[1]) * 1000 for key, value in info.items() if value and (m := re.search(r"_above_(\d+)k_tokens", key))]
    return min(tiers, default=None)


def test_a_tiered_model_is_priced_by_its_card_only_below_its_first_tier(monkeypatch, tmp_path):
    from scopehub.hub.models import price_call

    monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    monkeypatch.setenv("HUB_PRICE_CACHE", str(tmp_path / "prices.json"))
    litellm = import_litellm()
    tiered = [model for model in _map_models(litellm, 10_000) if _first_tier(litellm.model_cost[model])]
    assert tiered, "this litellm's cost map has no model priced by token tiers"
    carded = 0
    for model in tiered[:25]:
        info = litellm.get_model_info(model)
        card = _rate_card(litellm, model, info)
        if card is None:
            continue
        carded += 1
        assert card.below <= _first_tier(info), model
        price_call(model, 1000, 10)  # the card is learnt
        prompt = _first_tier(info) + 1000
        exact = sum(litellm.cost_per_token(model=model, prompt_tokens=prompt, completion_tokens=10))
        assert price_call(model, prompt, 10).cost == exact, model  # above the tier, litellm's own price
    assert carded


def test_two_installs_sharing_the_file_keep_each_others_models(monkeypatch, tmp_path):
    # Each litellm install (an upgrade, another checkout) has its own cost map; one writing
    # the file must not make the other import litellm again at its next start.
    from scopehub.hub.models import pricing

    monkeypatch.setenv("HUB_PRICE_CACHE", str(tmp_path / "prices.json"))
    for install in ("litellm 1", "litellm 2", "litellm 1"):
        monkeypatch.setattr(pricing._CostMapMemo, "key", staticmethod(lambda install=install: install))
        memo = pricing._CostMapMemo()
        assert ("openai/fake" in memo) == (install == "litellm 1" and memo.path().exists() and "litellm 1" in memo.path().read_text())
        memo.add("openai/fake")
        memo.add_rates("openai/gpt-4o-mini", pricing.RateCard(1.5e-07, 6e-07, 7.5e-08, 1.5e-07, 1.5e-07, 10_000_000))
    memo = pricing._CostMapMemo()
    assert "openai/fake" in memo and memo.rates("openai/gpt-4o-mini") is not None
    monkeypatch.setattr(pricing._CostMapMemo, "key", staticmethod(lambda: "litellm 2"))
    memo = pricing._CostMapMemo()
    assert "openai/fake" in memo and memo.rates("openai/gpt-4o-mini").output == 6e-07
