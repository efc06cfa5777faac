"""Offline pricing through genai-prices' bundled table (transforms.pricing)."""

from datetime import datetime, timezone

from genai_prices import Usage, calc_price

from transforms.pricing import _UNPRICED, Buckets, price_buckets

AT = datetime(2026, 3, 2, 9, tzinfo=timezone.utc)


def test_a_model_the_table_does_not_know_is_unknown_every_time_and_looked_up_once():
    first = price_buckets(Buckets(100, 0, 0, 0, 10), "codex-auto-review", "openai", AT)
    assert first.cost_usd is None and first.cost_source == "unknown"
    assert "'codex-auto-review' is not in the price table" in first.note
    assert ("codex-auto-review", "openai") in _UNPRICED  # the miss is remembered, by model and provider
    again = price_buckets(Buckets(5000, 200, 0, 0, 99), "codex-auto-review", "openai", AT.replace(hour=23))
    assert again == first


def test_a_known_model_is_priced_exactly_after_a_miss():
    price_buckets(Buckets(1, 0, 0, 0, 1), "no-such-model-anywhere", "openai", AT)
    priced = price_buckets(Buckets(1000, 500, 0, 0, 100), "gpt-5.1-codex-mini", "openai", AT)
    expected = calc_price(Usage(input_tokens=1500, cache_read_tokens=500, cache_write_tokens=0,
                                cache_write_1h_tokens=0, output_tokens=100), "gpt-5.1-codex-mini",
                          provider_id="openai", genai_request_timestamp=AT)
    assert priced.cost_source == "estimated"
    assert priced.cost_usd == float(round(expected.total_price, 9)) and priced.cost_usd > 0


def test_a_token_count_out_of_range_leaves_a_request_or_a_total_unpriced():
    """genai-prices raised for a negative count, failing the whole source; a total of many
    requests priced it as a negative cost. Neither is a price: unknown, and the lake nulls the count."""
    from transforms.costs import price_aggregate

    for bad in (Buckets(input_uncached=-5, output=10), Buckets(output=10**12 + 1), Buckets(cache_read=5, reasoning=-1)):
        assert bad.out_of_range and bad.total is not None  # the request is kept (OpenCode's negative input)
        assert bad.total == sum(v for v in (bad.input_uncached, bad.cache_read, bad.output) if v and 0 <= v <= 10**12)
        for priced in (price_buckets(bad, "claude-sonnet-4-5", "anthropic", None),
                       price_aggregate(bad, "claude-sonnet-4-5", "anthropic", None)):
            assert (priced.cost_usd, priced.cost_source) == (None, "unknown") and "out of range" in priced.note
    good = Buckets(input_uncached=0, output=10**12)
    assert not good.out_of_range and good.total == 10**12
    assert price_buckets(good, "claude-sonnet-4-5", "anthropic", None).cost_source == "estimated"


def test_seven_agents_keep_a_negative_count_where_it_belongs_and_leave_the_request_unpriced():
    """Droid, Copilot, Amp, Goose, Kilo, Kimi and Gemini (Qwen's reader too) read a negative count as
    not recorded: its request was priced on the other counts as if it had none (Kimi's was no request
    at all; a negative output, added to reasoning or subtracted from an input, came out as some other
    number). Each now keeps the count as written in its own column, takes it into no sum, and leaves
    the request unpriced, as OpenCode's and pi's (whose stores have written one) are: the lake nulls
    it with the source's warning."""
    from transforms.amp.normalise import message_buckets
    from transforms.copilot.normalise import usage_buckets as copilot
    from transforms.droid.normalise import usage_buckets as droid
    from transforms.gemini.genai import usage_buckets as gemini
    from transforms.goose.normalise import session_buckets as goose
    from transforms.kilo.normalise import request_buckets as kilo
    from transforms.kimi.normalise import usage_buckets as kimi

    cases = [
        (droid({"inputTokens": 100, "outputTokens": -7, "thinkingTokens": 20}),
         Buckets(input_uncached=100, output=-7, reasoning=20)),
        (droid({"inputTokens": 100, "outputTokens": 50, "thinkingTokens": -3}),
         Buckets(input_uncached=100, output=50, reasoning=-3)),
        (copilot({"inputTokens": 1000, "cacheReadTokens": -200, "outputTokens": 9}),
         Buckets(input_uncached=1000, cache_read=-200, output=9)),
        (copilot({"inputTokens": -1000, "cacheReadTokens": 200, "outputTokens": 9}),
         Buckets(input_uncached=-1000, cache_read=200, output=9)),
        (message_buckets({"inputTokens": -4, "outputTokens": 12}), Buckets(input_uncached=-4, output=12)),
        (message_buckets({"totalTokens": -40}), Buckets(input_uncached=-40)),
        (goose({"accumulated_input_tokens": -100, "accumulated_output_tokens": 50,
                "accumulated_total_tokens": 180}), Buckets(input_uncached=-100, output=50)),
        (gemini(100, 30, -5, 0, 0, 125), Buckets(input_uncached=70, cache_read=30, output=-5, reasoning=0)),
        (gemini(100, -30, 5, 0, 0, 105), Buckets(input_uncached=100, cache_read=-30, output=5, reasoning=0)),
        (gemini(100, 30, 5, 0, -2, 103), Buckets(input_uncached=-2, cache_read=30, output=5, reasoning=0)),
        # the other side read as usual: the thoughts still in the output beside a bad cache read
        (gemini(100, -30, 5, 40, 0, 145), Buckets(input_uncached=100, cache_read=-30, output=45, reasoning=40)),
        (gemini(100, 30, 5, -40, 0, 105), Buckets(input_uncached=70, cache_read=30, output=5, reasoning=-40)),
        (kilo({"tokensIn": -500, "tokensOut": 10, "cacheReads": 100}, None),
         Buckets(input_uncached=-500, cache_read=100, output=10)),
        (kilo({"tokensIn": 500, "tokensOut": -10.0}, None), Buckets(input_uncached=500, output=-10)),
        (kimi({"input_other": -5, "output": 10}), Buckets(input_uncached=-5, output=10)),
    ]
    for got, kept in cases:
        assert got == kept and got.out_of_range
        assert all(v is None or type(v) is int for v in vars(got).values())  # Kilo's -10.0 is the count -10
        assert price_buckets(got, "claude-sonnet-4-5", "anthropic", AT).cost_source == "unknown"
    # a total is a check on the counts (Goose's, Gemini's): one out of range is read as not recorded
    assert goose({"accumulated_input_tokens": 100, "accumulated_output_tokens": 50,
                  "accumulated_total_tokens": -1}) == Buckets(input_uncached=100, output=50)
    assert goose({"accumulated_total_tokens": 10**13}) is None
    assert gemini(100, 0, 5, 40, 0, -1) == Buckets(input_uncached=100, cache_read=0, output=45, reasoning=40)
    # counts in range are read as before: a count of 2^63 or more still cannot be kept
    assert droid({"inputTokens": 100, "outputTokens": 50, "thinkingTokens": 20}) == Buckets(
        input_uncached=100, output=70, reasoning=20)
    assert copilot({"inputTokens": 1 << 63, "outputTokens": 9}) == Buckets(output=9)
