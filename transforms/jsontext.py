"""JSON text from agents' stores, decoded without letting odd input crash a run."""

import json
import re

import orjson

# a \\uD800-\\uDFFF escape: JSON allows a lone surrogate, UTF-8 (and Parquet) cannot hold one
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


def _reject_constant(name):
    # agents write RFC 8259 JSON: NaN and Infinity mean the text was not written by them
    raise ValueError(f"non-finite number {name} is not JSON")


def dumps(value) -> str:
    """Compact JSON text, non-ASCII kept; the same value always gives the same text."""
    try:
        return orjson.dumps(value).decode()
    except TypeError:  # an integer beyond 64 bits, or a non-str key: the standard library copes
        return _COMPACT.encode(value)


# built once: json.dumps with options builds a new encoder on every call
_COMPACT = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))


def _clean(value):
    if isinstance(value, str):
        return value.encode("utf-8", "replace").decode("utf-8")  # lone surrogates -> '?'
    if isinstance(value, list):
        return [_clean(v) for v in value]
    if isinstance(value, dict):
        return {_clean(k): _clean(v) for k, v in value.items()}
    return value


# built once: json.loads with options builds a new decoder on every call
_DECODER = json.JSONDecoder(parse_constant=_reject_constant)


def loads(text: str):
    """json.loads that rejects NaN/Infinity and replaces lone surrogates.

    orjson decodes the ordinary case several times faster; what it refuses (lone surrogates,
    integers over 64 bits, very deep nesting) goes through the standard library, which either
    decodes it or says exactly what is wrong. Raises ValueError (or RecursionError) on bad input.
    """
    if not isinstance(text, str):
        raise TypeError(f"expected text, got {type(text).__name__}")
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        pass
    value = _DECODER.decode(text)
    if _SURROGATE_ESCAPE.search(text):  # rare: only then walk the value
        value = _clean(value)
    return value
