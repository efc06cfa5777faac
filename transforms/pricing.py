"""Offline prices from the bundled `genai-prices` table, for agents that record no cost.

Only a total token count may be known (CodeWhale): it is priced at the model's input rate for
a request under the long-context threshold, a documented estimate, never an invented split.
A model the table does not know has no price: its cost is unknown, never $0.
"""

from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from functools import lru_cache

from transforms.contract import TOKENS

SAMPLE_TOKENS = 100_000  # below every long-context tier (200k), so the base rate applies


@dataclass(frozen=True)
class Priced:
    cost_usd: float | None
    cost_source: str  # "estimated" or "unknown"
    note: str


# a request with a token count the lake does not keep (TOKENS: nulled and quarantined as it lands):
# no price, where genai-prices raised for a negative one and failed the whole source
OUT_OF_RANGE = Priced(None, "unknown", "a token count out of range (negative or over 10^12): not priced")


def in_range(count: int | None) -> bool:
    return count is None or TOKENS[0] <= count <= TOKENS[1]


@lru_cache(maxsize=512)
def input_rate(model: str, provider: str | None, day: str | None) -> tuple[Decimal, str] | None:
    """USD per input token for the model (and the matched model id), or None if unpriced."""
    from genai_prices import Usage, calc_price  # imported on first use: it loads a large table

    when = datetime.fromisoformat(day) if day else None
    # the agent's provider; a guess from the model name only when it named none: a model served
    # by a provider the table does not know (a local Ollama, a vLLM box) is not priced as an API
    for provider_id in ((provider,) if provider else (None,)):
        try:
            price = calc_price(Usage(input_tokens=SAMPLE_TOKENS), model, provider_id=provider_id,
                               genai_request_timestamp=when)
        except (LookupError, ValueError):
            continue
        return Decimal(price.total_price) / SAMPLE_TOKENS, f"{price.provider.id}/{price.model.id}"
    return None


def price_total_tokens(total_tokens: int | None, model: str | None, provider: str | None,
                       at: datetime | None) -> Priced:
    if not model or total_tokens is None:
        return Priced(None, "unknown", "no model or token count recorded")
    if not in_range(total_tokens):
        return OUT_OF_RANGE
    day = at.strftime("%Y-%m-%dT%H:00:00+00:00") if at else None  # prices vary by hour at most
    rate = input_rate(model, provider if provider not in (None, "", "custom") else None, day)
    if rate is None:
        return Priced(None, "unknown", f"model {model!r} is not in the price table")
    per_token, matched = rate
    return Priced(float(round(per_token * total_tokens, 9)), "estimated",
                  f"{total_tokens} tokens at the input rate of {matched}")


# (model, provider) -> the answer for a model the table does not know. genai-prices raises its
# LookupError from the model and provider lookup alone (never from the tokens or the time), and
# caches hits but not misses: Codex's review model (`codex-auto-review`) paid the lookup on every
# request (docs/BENCHMARKS.md, "Figures behind the code's choices").
_UNPRICED: dict[tuple[str, str | None], Priced] = {}


@dataclass(frozen=True)
class Buckets:
    """One request's tokens in disjoint buckets (None: the agent did not record it)."""

    input_uncached: int | None = None
    cache_read: int | None = None
    cache_write_5m: int | None = None
    cache_write_1h: int | None = None
    output: int | None = None
    reasoning: int | None = None  # a part of `output`, never added to it

    @property
    def total(self) -> int | None:
        """The buckets' sum, None when nothing was recorded. One out of range is left out, as the lake
        nulls it: the total stays the sum of the token columns (transforms.contract)."""
        parts = (self.input_uncached, self.cache_read, self.cache_write_5m, self.cache_write_1h, self.output)
        return None if all(p is None for p in parts) else sum(p for p in parts if p is not None and in_range(p))

    @property
    def any_count(self) -> bool:
        """A request's counts, not a placeholder's: some nonzero token count, or one out of range
        (counts recorded badly are still a request: not priced, never dropped)."""
        return bool(self.total) or self.out_of_range

    @property
    def out_of_range(self) -> bool:
        return not all(in_range(p) for p in (self.input_uncached, self.cache_read, self.cache_write_5m,
                                                self.cache_write_1h, self.output, self.reasoning))

    def columns(self) -> dict:
        """The `usage` table's token columns."""
        return {"input_uncached_tokens": self.input_uncached, "cache_read_tokens": self.cache_read,
                "cache_write_5m_tokens": self.cache_write_5m, "cache_write_1h_tokens": self.cache_write_1h,
                "output_tokens": self.output, "reasoning_tokens": self.reasoning, "total_tokens": self.total}


def price_buckets(buckets: Buckets, model: str | None, provider: str | None, at: datetime | None,
                  price_context: dict | None = None, web_searches: int = 0) -> Priced:
    """Price one request offline with genai-prices, cache reads and writes at the provider's own
    multipliers, plus server-side web searches where billed per request. genai-prices takes the
    TOTAL input, with the cache buckets as parts of it."""
    if not model:
        return Priced(None, "unknown", "no model recorded")
    if buckets.out_of_range:
        return OUT_OF_RANGE
    if buckets.total is None:
        return Priced(None, "unknown", "no token counts recorded")
    from genai_prices import Usage, calc_price

    write_5m, write_1h = buckets.cache_write_5m or 0, buckets.cache_write_1h or 0
    usage = Usage(
        input_tokens=(buckets.input_uncached or 0) + (buckets.cache_read or 0) + write_5m + write_1h,
        cache_read_tokens=buckets.cache_read or 0,
        cache_write_tokens=write_5m + write_1h,
        cache_write_1h_tokens=write_1h,
        output_tokens=buckets.output or 0,
        web_searches=web_searches,
    )
    provider_id = provider if provider not in (None, "", "custom") else None
    unpriced = _UNPRICED.get((model, provider_id))
    if unpriced is not None:
        return unpriced
    try:
        price = calc_price(usage, model, provider_id=provider_id, genai_request_timestamp=at,
                           price_context=price_context)
    except (LookupError, ValueError) as exc:
        priced = Priced(None, "unknown", f"model {model!r} is not in the price table ({exc})"[:200])
        if isinstance(exc, LookupError):
            _UNPRICED[(model, provider_id)] = priced
        return priced
    return Priced(float(round(Decimal(price.total_price), 9)), "estimated",
                  f"{price.provider.id}/{price.model.id}")


# Ways to ask genai-prices for a recorded model, in order: the name alone (the library finds the
# provider from it, so the maker's own id answers whoever served it), the library's own reading of
# a name that starts with its provider (`anthropic/claude-sonnet-4.5`, as it reads LiteLLM's
# names), then the agent's provider (a name that does not say its maker's: `glm-4.6` under `zai`).
_PREFIXED = "litellm"


@lru_cache(maxsize=4096)
def model_name(model: str, provider: str | None) -> str:
    """The name a recorded model groups under: the id of the model genai-prices resolves it to
    (`claude-sonnet-4-5-20250929`, `claude-sonnet-4.5` and `anthropic/claude-sonnet-4.5` are
    `claude-sonnet-4-5`), else the recorded name lower-cased, as the library compares names."""
    from genai_prices.data_snapshot import get_snapshot  # imported on first use: it loads a large table

    snapshot = get_snapshot()
    asked = [None] + ([_PREFIXED] if "/" in model else []) + (
        [provider] if provider not in (None, "", "custom") else [])
    for provider_id in asked:
        try:
            return snapshot.find_provider_model(model, None, provider_id, None)[1].id
        except (LookupError, ValueError):
            continue
    return model.lower()


@lru_cache(maxsize=1)
def prices_version() -> str:
    """The genai-prices release whose table resolves the names (`model_name`): read once per
    process (a search of the installed packages' metadata, at every merge otherwise)."""
    from importlib.metadata import version

    return version("genai-prices")
