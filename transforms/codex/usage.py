"""Codex token usage: per-request deltas of the cumulative `total_token_usage`
(docs/FORMATS.md, "Codex: token usage").

Codex writes a `token_count` event after each model response, and re-emits it unchanged on
rate-limit and UI refreshes: summing `last_token_usage` over-counts. So each event counts the
difference from the previous cumulative total; an unchanged total is a repeat and counts
nothing; a total that goes backwards (a reset) re-baselines, and that event counts its own
`last_token_usage`. An event with only `last_token_usage` counts that.

Buckets (docs/FORMATS.md, "Pricing: disjoint buckets"): `input_tokens` already includes the
cached input and `output_tokens` already includes the reasoning, so uncached = input - cached - cache writes,
and reasoning is kept as the informational part of output. `cache_write_input_tokens` is a
newer optional field: when absent, cache writes are not recorded (null, never 0).
"""

from dataclasses import dataclass

from transforms.jsontext import int64_or_none
from transforms.pricing import Buckets, in_range

FIELDS = ("input_tokens", "cached_input_tokens", "output_tokens", "reasoning_output_tokens", "total_tokens",
          "cache_write_input_tokens")


def counts(usage) -> dict[str, int] | None:
    """The integer fields of a TokenUsage object; None when there are none. One out of range
    (negative) is kept: a request that holds it is not priced, and the lake nulls and quarantines
    it (dropped here, a request was priced as if it had no output)."""
    if not isinstance(usage, dict):
        return None
    out = {k: usage[k] for k in FIELDS if int64_or_none(usage.get(k)) is not None}
    return out or None


def _out_of_range(tokens: dict[str, int]) -> bool:
    return not all(in_range(v) for v in tokens.values())


def _size(usage: dict) -> int:
    if "total_tokens" in usage:
        return usage["total_tokens"]
    return usage.get("input_tokens", 0) + usage.get("output_tokens", 0)


@dataclass(frozen=True)
class Delta:
    tokens: dict[str, int]
    how: str  # "delta" (of the cumulative totals), "re-baselined" or "last only"


class TokenDeltas:
    """Feed a session's token_count `info` objects in file order; get what each one adds."""

    def __init__(self):
        self.previous: dict[str, int] | None = None
        self.bad_totals = 0  # events whose cumulative total held a count out of range (said by the normaliser)
        self.bad_event: tuple | None = None  # the last of them, whose repeats count nothing

    def feed(self, info) -> Delta | None:
        if not isinstance(info, dict):  # `info: null`: a rate-limit-only event
            return None
        total, last = counts(info.get("total_token_usage")), counts(info.get("last_token_usage"))
        if total is not None and _out_of_range(total):
            # no total to count from: its own request's counts stand in, and move the baseline on by
            # as much (the next total's difference would count them again); without usable ones, the
            # next total's difference counts this request
            event = (total, last)
            if event == self.bad_event:  # re-emitted unchanged, as any token_count is: counts nothing again
                return None
            self.bad_event = event
            self.bad_totals += 1
            if not _nonzero(last) or _out_of_range(last):
                return None
            self.previous = dict(last) if self.previous is None else {
                k: self.previous.get(k, 0) + last.get(k, 0) for k in self.previous.keys() | last}
            return Delta(last, "last only")
        if total is None:
            return Delta(last, "last only") if _nonzero(last) else None
        previous, self.previous = self.previous, total
        if previous is None:
            return Delta(total, "delta") if _nonzero(total) else None
        if total == previous:
            return None  # a re-emitted event
        diff = {k: total[k] - previous.get(k, 0) for k in total}
        if _size(total) < _size(previous) or any(v < 0 for v in diff.values()):
            delta = last or total  # the totals were reset: start again from here
            return Delta(delta, "re-baselined") if _nonzero(delta) else None
        return Delta(diff, "delta") if _nonzero(diff) else None


def _nonzero(tokens: dict | None) -> bool:
    return bool(tokens) and any(v for k, v in tokens.items() if k != "total_tokens")


def buckets(tokens: dict[str, int]) -> Buckets:
    inp, cached = tokens.get("input_tokens"), tokens.get("cached_input_tokens")
    write = tokens.get("cache_write_input_tokens")
    uncached = None if inp is None else inp - (cached or 0) - (write or 0)
    return Buckets(input_uncached=uncached, cache_read=cached, cache_write_5m=write,
                   output=tokens.get("output_tokens"), reasoning=tokens.get("reasoning_output_tokens"))
