"""Arrow columns from lists of loosely typed values, at C speed when the values are what they
should be, value by value (the same conversion as a row at a time) when they are not.

SQLite's loose typing and hand-edited JSON put a number where text belongs now and then; the
fast path refuses those columns (Arrow raises) and the tolerant conversion takes them.
"""

from collections.abc import Callable

import pyarrow as pa
import pyarrow.compute as pc

from transforms.contract import TS, Table
from transforms.timestamps import from_epoch

_SECONDS_BELOW = 10**11  # transforms.timestamps: above this an epoch is not in seconds


def as_text(value) -> str | None:
    """A SQLite value as text: BLOBs decoded (invalid UTF-8 replaced), numbers written out."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value)


def strings(values: list, convert: Callable) -> pa.Array:
    """A string column; `convert` turns what is not a string (or valid UTF-8 bytes) into one."""
    try:
        return pa.array(values, pa.string())
    except (pa.ArrowTypeError, pa.ArrowInvalid):
        return pa.array([convert(v) for v in values], pa.string())


def empty_as_null(values: pa.Array) -> pa.Array:
    """`value or None` over a string column."""
    return pc.if_else(pc.equal(values, ""), pa.scalar(None, values.type), values)


def _inferred(values) -> pa.Array | None:
    """The values as Arrow infers them (bool stays bool, a float makes the column double), or
    None when they cannot share a type or an integer exceeds 64 bits."""
    try:
        return pa.array(values)
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):
        return None


def typed(values: list, kind: type, arrow_type: pa.DataType, convert: Callable) -> pa.Array:
    """A column of exact Python type `kind` (bool is not an int here) or None; else `convert`
    each value. Arrow alone would truncate 1.5 to 1 and read True as 1."""
    inferred = _inferred(values)
    if inferred is not None and inferred.type in (arrow_type, pa.null()):
        return inferred.cast(arrow_type)
    return pa.array([convert(v) for v in values], arrow_type)


def epochs(values: list, counter: dict) -> pa.Array:
    """transforms.timestamps.from_epoch over a column: whole seconds (every ordinary row) are
    converted by Arrow; a column with anything else goes value by value, counting the units."""
    seconds = _inferred(values)
    if seconds is not None and seconds.type in (pa.int64(), pa.null()):
        seconds = seconds.cast(pa.int64())
        low, high = pc.min_max(seconds).values()
        if low.as_py() is None or (low.as_py() >= 0 and high.as_py() < _SECONDS_BELOW):
            seconds = pc.if_else(pc.equal(seconds, 0), pa.scalar(None, pa.int64()), seconds)  # 0 is "unset"
            return pc.multiply(seconds, 1_000_000).cast(TS)
    return pa.array([from_epoch(v, counter) for v in values], TS)


def scatter(values: pa.Array, mask: pa.Array) -> pa.Array:
    """`values` in order at the true positions of `mask`, null elsewhere."""
    return pc.replace_with_mask(pa.nulls(len(mask), values.type), mask, values)


def assemble(table: Table, n: int, columns: dict) -> pa.Table:
    """A contract table of `n` rows: arrays as given, scalars repeated, other columns null."""
    arrays = []
    for field in table.schema:
        value = columns.get(field.name)
        if value is None:
            arrays.append(pa.nulls(n, field.type))
        elif isinstance(value, (pa.Array, pa.ChunkedArray)):
            arrays.append(value if value.type == field.type else value.cast(field.type))
        else:
            arrays.append(pa.repeat(pa.scalar(value, field.type), n))
    return pa.Table.from_arrays(arrays, schema=table.schema)
