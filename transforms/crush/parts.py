"""Crush's `messages.parts` JSON: parse it, and collect each part's typed columns.

The column holds `[{"type": kind, "data": {...}}, ...]` written by Go's encoding/json. Tool
inputs and result metadata are JSON text inside that JSON; they stay text here and are decoded
where they are used (transforms.tools).

Parts are collected column by column (`PartColumns`), never as one row dict per part: a store
holds millions of them. Each part is decoded once, in Python (orjson through transforms.jsontext),
because `raw` must be its exact compact re-serialisation; its `data` is kept with the other parts
of its type, and each typed column is read from them and converted at once
(transforms.crush.columns). A columnar JSON reader was measured and not used: polars'
`str.json_decode` with the full schema took longer than orjson here, and it coerces silently
(1.5 to 1 and true to 1 in an integer field, a lone surrogate to NUL), so it could not give the
same rows; DuckDB re-serialises each element itself, so `raw` would change.
"""

from itertools import repeat

import pyarrow as pa
import pyarrow.compute as pc

from transforms import jsontext
from transforms.crush.columns import empty_as_null, epochs, scatter, strings, typed
from transforms.tools import compact_json

KNOWN_TYPES = frozenset(
    {"text", "reasoning", "image_url", "binary", "tool_call", "tool_result", "finish", "shell_command"}
)

# part type -> (column, key in its `data`) of every typed column it fills
FIELDS = {
    "text": (("text", "text"),),
    "reasoning": (("reasoning", "thinking"), ("reasoning_started_at", "started_at"),
                  ("reasoning_finished_at", "finished_at")),
    "tool_call": (("tool_call_id", "id"), ("tool_name", "name"), ("tool_input", "input")),
    "tool_result": (("tool_call_id", "tool_call_id"), ("tool_name", "name"), ("tool_result", "content"),
                    ("tool_result_metadata", "metadata"), ("is_error", "is_error"), ("result_mime_type", "mime_type")),
    "finish": (("finish_reason", "reason"), ("finish_time", "time"), ("finish_message", "message"),
               ("finish_details", "details")),
    "binary": (("binary_path", "Path"), ("mime_type", "MIMEType"), ("binary_size", "Data")),
    "image_url": (("url", "url"),),
    "shell_command": (("shell_command", "command"), ("shell_output", "output"), ("shell_exit_code", "exit_code")),
}
_KINDS_OF = {}  # column -> the part types that fill it
for _kind, _fields in FIELDS.items():
    for _column, _ in _fields:
        _KINDS_OF.setdefault(_column, []).append(_kind)
_TIMES = ("reasoning_started_at", "reasoning_finished_at", "finish_time")


class PartsError(ValueError):
    """The parts text is not a JSON array; the message goes to quarantine."""


def parse_parts(text) -> list:
    if text is None:
        raise PartsError("parts is NULL")
    if isinstance(text, bytes):  # stored as a BLOB
        text = text.decode("utf-8", "replace")
    if not isinstance(text, str):
        raise PartsError(f"parts is a {type(text).__name__}, not JSON text")
    try:
        value = jsontext.loads(text)
    except (ValueError, RecursionError) as exc:
        raise PartsError(f"parts is not valid JSON: {exc}") from None
    if not isinstance(value, list):
        raise PartsError(f"parts is a JSON {type(value).__name__}, not an array")
    return value


def _s(v):
    """A string column: strings as they are, other JSON values as JSON text."""
    if v is None or isinstance(v, str):
        return v
    return compact_json(v)


def _i(v):
    if isinstance(v, bool):
        return int(v)
    if isinstance(v, int) and -(2**63) <= v < 2**63:
        return v
    if isinstance(v, float) and v.is_integer() and abs(v) < 2**63:
        return int(v)
    return None


def _b(v):
    return v if isinstance(v, bool) else None


def _base64_size(data) -> int | None:
    if not isinstance(data, str):
        return None
    n = len(data.rstrip("="))
    return n * 3 // 4


class PartColumns:
    """The parts of many messages, column by column, in the order they were added."""

    def __init__(self):
        self.message: list[int] = []  # position of the owning message in the caller's columns
        self.index: list[int] = []
        self.raw: list = []
        self.part_type: list[str] = []
        self.data = {kind: [] for kind in FIELDS}  # each part's `data`, by part type
        # the rare part of an unknown type or shape: position -> its `type` as found
        self.odd: dict[int, object] = {}

    def add(self, message: int, parts: list, raws: list) -> None:
        """One message's parsed parts and their compact JSON (`raws`, made by the caller first:
        the only step that can fail, so a failure leaves nothing half added)."""
        n = len(parts)
        self.message.extend([message] * n)
        self.index.extend(range(n))
        self.raw.extend(raws)
        part_type, data_of = self.part_type.append, self.data
        for part in parts:
            if type(part) is dict:
                kind, data = part.get("type"), part.get("data")
                if type(kind) is str and kind in KNOWN_TYPES and type(data) is dict:
                    part_type(kind)
                    data_of[kind].append(data)
                    continue
            self.add_odd(part)

    def add_odd(self, part) -> None:
        """A part that is not `{"type": known, "data": {...}}`: kept raw, its type counted."""
        kind = part.get("type") if isinstance(part, dict) else None
        # Crush's names are the canonical vocabulary (contract.PART_TYPES): an unknown one is `other`
        known_name = isinstance(kind, str) and kind in KNOWN_TYPES
        self.odd[len(self.part_type)] = kind
        self.part_type.append(kind if known_name else "other")  # a known name with a shape we cannot read

    def __len__(self) -> int:
        return len(self.index)

    def columns(self, counter: dict) -> dict[str, pa.Array]:
        """The parts' own columns of contract.PARTS (the owning message's are the caller's);
        millisecond timestamps and the like are counted in `counter`."""
        n = len(self.part_type)
        known, native = [True] * n, self.part_type
        if self.odd:
            native = list(native)
            for position, kind in self.odd.items():
                known[position] = False
                native[position] = kind
        part_type = pa.array(self.part_type, pa.string())
        known = pa.array(known, pa.bool_())
        out = {
            "part_index": pa.array(self.index, pa.int64()),
            "part_type": part_type,
            "native_part_type": strings(native, _s) if self.odd else part_type,
            "is_known_type": known,
            "raw": pa.array(self.raw, pa.string()),
        }
        filled: dict[str, list] = {}
        for kind, fields in FIELDS.items():
            datas = self.data[kind]
            if not datas:
                continue
            mask = pc.and_(known, pc.equal(part_type, kind))
            for column, key in fields:
                array = _convert(column, list(map(dict.get, datas, repeat(key, len(datas)))), counter)
                filled.setdefault(column, []).append(scatter(array, mask))
        for column in _KINDS_OF:
            arrays = filled.get(column)
            if arrays:  # the part types that fill a column never overlap: one value per row at most
                out[column] = pc.coalesce(*arrays) if len(arrays) > 1 else arrays[0]
        # a tool result's empty MIME type is null, a binary's is kept as stored
        result_mime = out.pop("result_mime_type", None)
        if result_mime is not None:
            out["mime_type"] = pc.coalesce(out["mime_type"], result_mime) if "mime_type" in out else result_mime
        return out

    def unknown_types(self) -> list:
        """native_part_type of each part of an unknown type or shape, for the findings."""
        return [_s(kind) for kind in self.odd.values()]


def _convert(column: str, values: list, counter: dict) -> pa.Array:
    if column in _TIMES:
        return epochs(values, counter)
    if column == "is_error":
        return typed(values, bool, pa.bool_(), _b)
    if column == "binary_size":
        return pa.array([_base64_size(v) for v in values], pa.int64())
    if column == "shell_exit_code":
        return pa.array([_i(v) for v in values], pa.int64())
    array = strings(values, _s)
    return empty_as_null(array) if column == "result_mime_type" else array
