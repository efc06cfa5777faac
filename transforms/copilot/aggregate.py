"""Pricing a token total that many requests made (Copilot's per-lifetime metrics, Droid's
session totals). Priced as one request, a total over 200k input tokens would take the
long-context rates, which none of the requests that made it paid: each bucket is priced at the
model's base rate instead (the price of a 100k-token sample of it, scaled)."""

from datetime import datetime
from decimal import Decimal

from transforms.pricing import Buckets, Priced, price_buckets

SAMPLE = 100_000  # below every long-context tier
BUCKETS = ("input_uncached", "cache_read", "cache_write_5m", "cache_write_1h", "output")


def price_aggregate(total: Buckets, model: str | None, provider: str | None, at: datetime | None) -> Priced:
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
