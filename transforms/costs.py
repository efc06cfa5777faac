"""A session's cost from its requests' costs, and the price of a token total that many requests
made. Shared by the providers; the prices themselves come from transforms.pricing."""

from datetime import datetime
from decimal import Decimal

from transforms.pricing import OUT_OF_RANGE, Buckets, Priced, price_buckets


def session_cost(requests: list[tuple[float | None, str]]) -> tuple[float | None, str]:
    """Cost and cost_source over a session's (cost_usd, cost_source) requests (its sub-agents'
    included), for agents that record a cost for some requests (native) and not others."""
    priced = [cost for cost, _ in requests if cost is not None]
    sources = {source for _, source in requests}
    total = round(sum(priced), 9)
    if "unknown" in sources:
        return (total, "partial") if priced else (None, "unknown")
    return total, "estimated" if "estimated" in sources else "native"


def summarise_costs(costs: list[float | None]) -> tuple[float | None, str]:
    """A session's (cost_usd, cost_source) from its requests' estimated costs (None: unpriced),
    for agents that record no cost at all."""
    if not costs:  # no billed request (a probe, an aborted turn): a known $0, priced by us as nothing
        return 0.0, "estimated"
    priced = [c for c in costs if c is not None]
    if not priced:
        return None, "unknown"
    return round(sum(priced), 9), "estimated" if len(priced) == len(costs) else "partial"


# Pricing a token total that many requests made (Copilot's per-lifetime metrics, Droid's session
# totals). Priced as one request, a total over 200k input tokens would take the long-context
# rates, which none of the requests that made it paid: each bucket is priced at the model's base
# rate instead (the price of a 100k-token sample of it, scaled).
SAMPLE = 100_000  # below every long-context tier
BUCKETS = ("input_uncached", "cache_read", "cache_write_5m", "cache_write_1h", "output")


def price_aggregate(total: Buckets, model: str | None, provider: str | None, at: datetime | None) -> Priced:
    if total.out_of_range:  # as one request's (price_buckets): no price, nulled as it lands
        return OUT_OF_RANGE
    usd, note = Decimal(0), None
    for name in BUCKETS:
        count = getattr(total, name)
        if not count:
            continue
        sample = price_buckets(Buckets(**{name: SAMPLE}), model, provider, at)
        if sample.cost_usd is None:
            return sample
        usd += Decimal(str(sample.cost_usd)) * count / SAMPLE
        note = sample.note
    if note is None:  # every bucket empty: what a single request of nothing costs
        return price_buckets(total, model, provider, at)
    return Priced(float(round(usd, 9)), "estimated", f"{note} at its base rates (a total of many requests)")
