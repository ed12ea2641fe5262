"""Model prices come from one table of known models (jobs.llm.prices): changing the model changes
the price, a dated snapshot costs what its model costs, and an unknown model is priced at the stated
default with one warning (not at another model's prices without a word)."""

from __future__ import annotations

import logging

import pytest

from jobs import config
from jobs.llm import cost_usd, prices
from jobs.models import ModelCall

MTOK = 1_000_000


def _call(
    model: str,
    *,
    input_tokens: int = 0,
    output_tokens: int = 0,
    cache_read_tokens: int = 0,
    cache_write_tokens: int = 0,
) -> ModelCall:
    return ModelCall(
        template="t",
        prompt_hash="h",
        model=model,
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        cache_read_tokens=cache_read_tokens,
        cache_write_tokens=cache_write_tokens,
    )


def test_known_models_cost_their_own_prices() -> None:
    settings = config.Settings()
    assert cost_usd(settings, _call("claude-haiku-4-5", input_tokens=MTOK, output_tokens=MTOK)) == 6.0
    assert cost_usd(settings, _call("claude-sonnet-4-5-20250929", input_tokens=MTOK, output_tokens=MTOK)) == 18.0
    assert cost_usd(settings, _call("claude-opus-4-1", input_tokens=MTOK, output_tokens=MTOK)) == 90.0
    # cache writes 1.25x and reads 0.1x the input price; batches half
    assert cost_usd(settings, _call("claude-sonnet-4-5", cache_write_tokens=MTOK, cache_read_tokens=MTOK)) == 4.05
    batch = _call("claude-sonnet-4-5", input_tokens=MTOK, output_tokens=MTOK)
    batch.batch = True
    assert cost_usd(settings, batch) == 9.0


def test_a_call_without_a_model_is_priced_as_the_configured_model() -> None:
    """The estimate of a plan names no answered model: changing EPISODES_MODEL changes its price."""
    estimate = _call("", input_tokens=MTOK, output_tokens=MTOK)
    assert cost_usd(config.Settings(model="claude-haiku-4-5"), estimate) == 6.0
    assert cost_usd(config.Settings(model="claude-opus-4-1"), estimate) == 90.0


def test_an_unknown_model_warns_once_and_costs_the_stated_default(caplog: pytest.LogCaptureFixture) -> None:
    model = "claude-unreleased-9-test-only"
    with caplog.at_level(logging.WARNING, logger="jobs.llm.prices"):
        first = cost_usd(config.Settings(), _call(model, input_tokens=MTOK, output_tokens=MTOK))
        second = cost_usd(config.Settings(), _call(model, input_tokens=MTOK))
    assert first == prices.DEFAULT_PRICE.input + prices.DEFAULT_PRICE.output
    assert second == prices.DEFAULT_PRICE.input
    warnings = [r for r in caplog.records if getattr(r, "action", None) == "unknown_model_price"]
    assert len(warnings) == 1
    assert model in warnings[0].getMessage() and "price table" in warnings[0].getMessage()


def test_an_id_that_only_starts_like_a_known_model_is_unknown() -> None:
    assert prices.known_price("claude-haiku-4-5-20251001") == prices.PRICES["claude-haiku-4-5"]
    assert prices.known_price("claude-opus-4-1-20250805") == prices.PRICES["claude-opus-4-1"]
    assert prices.known_price("claude-haiku-4-5-turbo") is None
    assert prices.known_price("claude-opus-4-2") is None
