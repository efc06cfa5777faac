"""JSON text from agents' stores (whole documents and JSONL lines), decoded without letting odd input
crash a run."""

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


UNFINISHED = "incomplete last line (no newline yet)"  # a bad line's why, when it may still be written


def json_lines(data: bytes | str):
    """(line number from 0, line text, value, None) for each non-blank line of a JSONL file, or
    (.., .., None, why) for a line that is not JSON: the caller quarantines it and reads on.

    Bytes are split on newlines, then each line decoded (invalid UTF-8 as U+FFFD). A last line
    that is not JSON and has no newline yet is said as such (UNFINISHED): a session being written,
    or cut short, not a broken line; the file is read again once it changes."""
    lines = data.split(b"\n" if isinstance(data, bytes) else "\n")
    for no, raw in enumerate(lines):
        text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw
        if not text.strip():
            continue
        try:
            yield no, text, loads(text), None
        except (ValueError, RecursionError) as exc:
            yield no, text, None, UNFINISHED if no == len(lines) - 1 else f"not valid JSON: {exc}"[:300]


def parse_object(text: str, not_object: str = "not a JSON object: {}") -> tuple[dict | None, str | None]:
    """The object a JSON text holds, or None and why not: `not valid JSON: <reason>` (cut to 300
    characters), or `not_object` with the type of the value it holds instead."""
    try:
        value = loads(text)
    except (ValueError, RecursionError) as exc:
        return None, f"not valid JSON: {exc}"[:300]
    if not isinstance(value, dict):
        return None, not_object.format(type(value).__name__)
    return value, None


def typed_lines(data: bytes | str, what: str) -> tuple[list[tuple[int, dict]], list[tuple[int, str, str]]]:
    """The (line number, object) of each line that is an object with a string `type`, and the
    (line number, text, reason) of the other non-blank lines; `what` names a good line."""
    good, bad = [], []
    for no, text, value, error in json_lines(data):
        if error is None and not (isinstance(value, dict) and isinstance(value.get("type"), str)):
            error = f"not {what} (an object with a `type`)"
        if error is None:
            good.append((no, value))
        else:
            bad.append((no, text, error))
    return good, bad


def str_or_none(v) -> str | None:
    """A decoded value that should be a string, else None (a field of another type is not one)."""
    return v if isinstance(v, str) else None


def int64_or_none(v) -> int | None:
    """A decoded integer that fits the lake's int64 columns (a negative one too: a token count out of
    range is kept, to be said and nulled as it lands, not read as not recorded), else None."""
    return v if isinstance(v, int) and not isinstance(v, bool) and -(1 << 63) <= v < 1 << 63 else None


def count_or_none(v) -> int | None:
    """A decoded value that should be a count (a non-negative integer, not a bool), else None."""
    return v if isinstance(v, int) and not isinstance(v, bool) and v >= 0 else None


# a first line that carries a whole instructions text (Codex's session_meta: 20-27 KB) fits
FIRST_LINE_CAP = 1 << 20


def head_lines(path, cap: int = FIRST_LINE_CAP):
    """A file's lines, without their ends, to `cap` bytes in all: each read to its end only (a read
    of `cap` took that much of every log at every discovery: docs/BENCHMARKS.md). Raises OSError."""
    with open(path, "rb") as fh:
        while fh.tell() < cap and (line := fh.readline(cap - fh.tell())):
            yield line.rstrip(b"\r\n")


def first_line(path, cap: int = FIRST_LINE_CAP):
    """The decoded JSON of a file's first line (read to `cap` bytes at most), or None when the file
    cannot be read or the line is not JSON: discovery reads only a log's head."""
    try:
        line = next(head_lines(path, cap), b"")
        return loads(line.decode("utf-8", "replace"))
    except (OSError, ValueError, RecursionError):
        return None
