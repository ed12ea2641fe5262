"""What a model call costs: one table of the models we know, in US dollars per million tokens.

A model is looked up by its id as configured (``EPISODES_MODEL``) or as the API answers it (the
same id with a snapshot date, ``claude-haiku-4-5-20251001``). A model not in the table is priced
at :data:`DEFAULT_PRICE` and a warning says so, once per model and process, instead of pricing
every call at another model's rates without a word. To price a new model, add a row here.

Prices are Anthropic's list prices (https://docs.claude.com/en/docs/about-claude/pricing): cache
writes are the 5-minute writes, 1.25x input; cache reads 0.1x input; Message Batches cost half.
The figures are estimates for reports and plans; the invoice is what counts.
"""

from __future__ import annotations

import logging
import re
import threading
from dataclasses import dataclass

log = logging.getLogger(__name__)

BATCH_DISCOUNT = 0.5  # Message Batches cost half


@dataclass(frozen=True)
class Price:
    """US dollars per million tokens."""

    input: float
    output: float
    cache_write: float
    cache_read: float


def _list_price(input_per_mtok: float, output_per_mtok: float) -> Price:
    """Anthropic's usual shape: cache writes 1.25x and cache reads 0.1x the input price."""
    return Price(input_per_mtok, output_per_mtok, round(input_per_mtok * 1.25, 4), round(input_per_mtok * 0.10, 4))


# Checked on 2026-11-26 against https://platform.claude.com/docs/en/about-claude/pricing and the models'
# overview pages. Haiku 5.5 costs more for prompts over 100,000 tokens; ours are capped far below that
# (Settings.transcript_token_budget), so its lower band is the one that applies.
PRICES: dict[str, Price] = {
    "claude-fable-5-1": Price(10.0, 50.0, 12.5, 0.25),
    "claude-fable-5": _list_price(10.0, 50.0),
    "claude-opus-5-5": Price(4.0, 20.0, 5.0, 0.20),
    "claude-opus-5": _list_price(5.0, 25.0),
    "claude-opus-4-8": _list_price(5.0, 25.0),
    "claude-opus-4-7": _list_price(5.0, 25.0),
    "claude-opus-4-6": _list_price(5.0, 25.0),
    "claude-opus-4-5": _list_price(5.0, 25.0),
    "claude-opus-4-1": _list_price(15.0, 75.0),
    "claude-opus-4": _list_price(15.0, 75.0),
    "claude-sonnet-5-5": Price(2.0, 10.0, 2.5, 0.10),  # cache reads 0.05x input since 2026-10-07
    "claude-sonnet-5": _list_price(2.0, 10.0),
    "claude-sonnet-4-6": _list_price(3.0, 15.0),
    "claude-sonnet-4-5": _list_price(3.0, 15.0),
    "claude-sonnet-4": _list_price(3.0, 15.0),
    "claude-3-7-sonnet": _list_price(3.0, 15.0),
    "claude-haiku-5-5": _list_price(0.10, 0.50),
    "claude-haiku-4-5": _list_price(1.0, 5.0),
    "claude-3-5-haiku": _list_price(0.8, 4.0),
    "claude-3-haiku": _list_price(0.25, 1.25),
}

# An unknown model is priced as a Sonnet-class model: neither the cheapest nor the dearest in the table.
DEFAULT_PRICE = _list_price(3.0, 15.0)

_SNAPSHOT = re.compile(r"^(?P<base>.+?)(?:-\d{8}|-latest)?$")
_warned: set[str] = set()
_warned_lock = threading.Lock()


def model_id(model: str) -> str:
    """``model`` without its snapshot date (``claude-haiku-4-5-20251001`` -> ``claude-haiku-4-5``)."""
    match = _SNAPSHOT.match(model.strip())
    return match.group("base") if match else model.strip()


def known_price(model: str) -> Price | None:
    """The table's price of ``model`` (an id, with or without its snapshot date), or None."""
    return PRICES.get(model_id(model))


def price_of(model: str) -> Price:
    """The price of ``model``; an unknown one costs :data:`DEFAULT_PRICE` and is logged once."""
    price = known_price(model)
    if price is not None:
        return price
    with _warned_lock:
        first = model not in _warned
        _warned.add(model)
    if first:
        log.warning(
            "model %r is not in the price table (jobs/llm/prices.py); its calls are priced at "
            "$%g input / $%g output per million tokens until a row is added for it",
            model,
            DEFAULT_PRICE.input,
            DEFAULT_PRICE.output,
            extra={"action": "unknown_model_price", "model": model},
        )
    return DEFAULT_PRICE


def cost(
    model: str,
    *,
    input_tokens: int,
    output_tokens: int,
    cache_write_tokens: int = 0,
    cache_read_tokens: int = 0,
    batch: bool = False,
) -> float:
    """US dollars for one call's tokens, rounded to a millionth."""
    price = price_of(model)
    total = (
        input_tokens * price.input
        + output_tokens * price.output
        + cache_write_tokens * price.cache_write
        + cache_read_tokens * price.cache_read
    ) / 1e6
    return round(total * (BATCH_DISCOUNT if batch else 1.0), 6)
