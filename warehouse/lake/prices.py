"""config.toml's `[[prices]]` and `[model_aliases]`: a team's own prices, in USD per million tokens,
for models the bundled table does not price (a self-hosted model, a proxy) or prices otherwise (a
negotiated rate). Read here; applied by the merge (warehouse.catalog.prices).

    [[prices]]
    model = "llama-3.3-70b-internal"
    since = 2026-01-01            # optional: from that day (UTC) on; none: from the start
    input = 0.6                   # USD per million input tokens, neither read from nor written to the cache
    output = 1.8
    cache_read = 0.06             # optional: the input rate when not given
    cache_write = 0.75            # optional: the input rate when not given (5-minute writes, and 1-hour ones
    cache_write_1h = 1.2          #   unless cache_write_1h is given)

    [model_aliases]               # a recorded model name -> a model priced in [[prices]]
    "vllm/llama-70b" = "llama-3.3-70b-internal"
"""

import hashlib
import json
from dataclasses import dataclass
from datetime import date
from decimal import Decimal
from pathlib import Path

from warehouse.lake.setting_names import unknown_setting

# how a price finds its requests, in the fingerprint: another rule re-prices the history once
# (2: also the names grouped under the price's model, warehouse.catalog.prices)
RULES = 2

RATES = ("input", "output", "cache_read", "cache_write", "cache_write_1h")
REQUIRED = ("input", "output")
PRICE_KEYS = ("model", "since", *RATES)
MAX_RATE = 1_000_000  # USD per million tokens: a rate above it is a typo, not a price


class PriceError(ValueError):
    """A bad [[prices]] entry or alias: the message names it (config.py raises it as a ConfigError)."""


@dataclass(frozen=True)
class Price:
    """One configured price: USD per million tokens for each `usage` bucket, from `since` on."""

    model: str
    since: date | None
    input: Decimal
    output: Decimal
    cache_read: Decimal
    cache_write_5m: Decimal
    cache_write_1h: Decimal

    @property
    def note(self) -> str:
        """The `pricing_note` of a request it prices."""
        return f"configured price for {self.model}" + (f" since {self.since.isoformat()}" if self.since else "")


@dataclass(frozen=True)
class Prices:
    """The configured prices and aliases; empty when config.toml sets none."""

    prices: tuple[Price, ...] = ()
    aliases: tuple[tuple[str, str], ...] = ()  # (recorded model, priced model), sorted

    def __bool__(self) -> bool:
        return bool(self.prices)

    def by_recorded_model(self) -> list[tuple[str, Price]]:
        """(model as recorded, lower-cased; its price) for each price and each alias to it."""
        priced = [(p.model.lower(), p) for p in self.prices]
        for recorded, target in self.aliases:
            final = resolve_alias(dict(self.aliases), recorded)
            priced += [(recorded.lower(), p) for p in self.prices if p.model.lower() == final.lower()]
        return priced

    def fingerprint(self) -> str:
        """What the merge records to notice a change of prices (empty for none): of the prices, of
        how a price finds its requests (RULES), and of the genai-prices release that groups the
        recorded names under the ones a price may name (warehouse.catalog.prices)."""
        if not self:
            return ""
        from transforms.pricing import prices_version

        text = json.dumps([RULES, prices_version()] + [
            [m, p.model, p.since.isoformat() if p.since else None, *map(str, _rates(p))]
            for m, p in sorted(self.by_recorded_model(), key=lambda mp: (mp[0], str(mp[1].since)))])
        return hashlib.sha256(text.encode()).hexdigest()


def _rates(p: Price) -> tuple[Decimal, ...]:
    return p.input, p.output, p.cache_read, p.cache_write_5m, p.cache_write_1h


def resolve_alias(aliases: dict[str, str], name: str) -> str:
    """The model an alias chain ends at (aliases already checked for cycles)."""
    while name in aliases:
        name = aliases[name]
    return name


def parse_prices(path: Path, entries, aliases) -> Prices:
    """`[[prices]]` and `[model_aliases]` checked; a PriceError names the entry at fault."""
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        raise PriceError(f"{path}: prices are [[prices]] tables (double brackets: one per model and date), each "
                         "with model, input and output")
    prices = tuple(_price(f"{path}: price {n}", entry) for n, entry in enumerate(entries, 1))
    seen: dict[tuple[str, date | None], int] = {}
    for n, price in enumerate(prices, 1):
        key = (price.model.lower(), price.since)
        if key in seen:
            when = f"from {price.since.isoformat()}" if price.since else "without a since date"
            raise PriceError(f"{path}: price {n}: a second price for {price.model} {when} (price {seen[key]})")
        seen[key] = n
    return Prices(prices, _aliases(path, aliases, {p.model.lower() for p in prices}))


def _price(where: str, entry: dict) -> Price:
    model = entry.get("model")
    if not isinstance(model, str) or not model.strip():
        raise PriceError(f"{where}: model must be a model name (a string)")
    where = f"{where} ({model})"
    unknown = sorted(set(entry) - set(PRICE_KEYS))
    if unknown:
        raise PriceError(f"{where}: {unknown_setting(unknown[0], PRICE_KEYS)}")
    since = entry.get("since")
    if since is not None and (not isinstance(since, date) or hasattr(since, "hour")):
        raise PriceError(f"{where}: since must be a date, unquoted (since = 2026-01-01)")
    for key in REQUIRED:
        if key not in entry:
            raise PriceError(f"{where}: {key} is required (USD per million tokens)")
    rates = {key: _rate(where, key, entry[key]) for key in RATES if key in entry}
    cache_write = rates.get("cache_write", rates["input"])
    return Price(model, since, rates["input"], rates["output"], rates.get("cache_read", rates["input"]),
                 cache_write, rates.get("cache_write_1h", cache_write))


def _rate(where: str, key: str, value) -> Decimal:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= MAX_RATE:
        raise PriceError(f"{where}: {key} must be a number of USD per million tokens, 0 or more (e.g. 3 or 0.25)")
    return Decimal(str(value))


def _aliases(path: Path, aliases, priced: set[str]) -> tuple[tuple[str, str], ...]:
    if not isinstance(aliases, dict) or not all(isinstance(v, str) and v for v in aliases.values()):
        raise PriceError(f"{path}: [model_aliases] maps a recorded model name to a model priced in [[prices]] "
                         "(strings)")
    lowered = {k.lower(): v.lower() for k, v in aliases.items()}
    for recorded, target in aliases.items():
        where = f"{path}: [model_aliases] {recorded!r}"
        if recorded.lower() in priced:
            raise PriceError(f"{where}: the model has a price of its own in [[prices]]: drop one of the two")
        chain, name = [recorded.lower()], target.lower()
        while name in lowered:
            if name in chain:
                loop = " -> ".join([recorded, *(lowered[c] for c in chain)])
                raise PriceError(f"{where}: an alias to itself ({loop})" if len(chain) == 1 and name == chain[0]
                                 else f"{where}: aliases in a cycle ({loop})")
            chain.append(name)
            name = lowered[name]
        if name not in priced:
            raise PriceError(f"{where}: {target!r} has no [[prices]] entry (an alias names a configured "
                             "price's model, not one of the bundled table)")
    return tuple(sorted(lowered.items()))
