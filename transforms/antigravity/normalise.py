"""One Antigravity CLI conversation database -> sessions and usage. Pure.

Antigravity is closed source: no public repository holds the writer of its stores. What is
read here is learned from the one peer that reads a local usage store, tokscale
(junhoyeo/tokscale `crates/tokscale-core/src/sessions/antigravity_cli.rs`), whose field numbers
were reverse-engineered from real databases; nothing here is confirmed by Google's source.
- The Antigravity IDE keeps conversations as `~/.gemini/antigravity/conversations/<uuid>.pb`,
  whose bytes are not a protobuf any peer decodes (no known magic: encrypted or compressed);
  peers get its usage by asking the RUNNING language server over RPC
  (`GetCascadeTrajectoryGeneratorMetadata`), which is not a store: NOT READABLE here, and
  discovery says so when such files exist.
- The Antigravity CLI (`agy`) keeps one SQLite database per conversation,
  `~/.gemini/antigravity-cli/conversations/<uuid>.db`. Each `gen_metadata` row (`idx`, `data`) is
  one model generation, a `GeneratorMetadata` protobuf: `#1` chatModel with `#4` usage (`#1` the
  fixed system-prompt tokens, `#2` newly processed input, `#5` cache reads, `#9` output text,
  `#10` thinking, `#11` the response id), `#19` the model id, `#21` its display label, `#9.#4`
  the generation's time (`{#1 seconds, #2 nanos}`, agy <= 1.1.17). The one
  `trajectory_metadata_blob` row holds the conversation's created-at (`#2`) and workspace URI
  (`#1.#1`).

What is taken, and the traps:
- tokens: input = `#1 + #2` (the system prompt is billed input, as tokscale reads it), cache
  reads `#5`, output = `#9 + #10` (thinking is part of output; tokscale checked
  `#9 + #10 == #3`), reasoning `#10` (proto3 omits zeros: an absent count is 0); cache writes are
  not recorded (NULL).
- streamed duplicates: a response id seen before in the file is the same generation: counted once.
- cost: none recorded: priced from genai-prices as Google's model (`estimated`), else `unknown`;
  Antigravity's machine ids (`gemini-3-flash-a`, `gemini-pro-agent`) are mostly not in the
  table, so most rows are `unknown`, never $0. The generic routing id `gemini-default` names no
  model: such a row takes the model its display label has elsewhere in the file, else stays
  `gemini-default` (unknown).
- time: a generation without a readable `#9.#4` (agy 1.1.18 moved it to bytes no one has
  confirmed) is dated at the conversation's created-at, never guessed.
- not read: the messages, parts and tool calls (no peer decodes the conversation content).
"""

from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

from transforms.pricing import Buckets, price_buckets

PROVIDER = "antigravity"
ROUTING = "gemini-default"
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


# --- the protobuf wire format (no schema: field number -> values)

def fields(data: bytes) -> dict[int, list]:
    """Top-level fields of a protobuf message: varints as ints, length-delimited as bytes,
    fixed64/fixed32 as raw bytes. Raises ValueError on bytes that are not a message."""
    out: dict[int, list] = {}
    i, n = 0, len(data)
    while i < n:
        key, i = _varint(data, i)
        number, wire = key >> 3, key & 7
        if number == 0:
            raise ValueError("field number 0")
        if wire == 0:
            value, i = _varint(data, i)
        elif wire == 2:
            size, i = _varint(data, i)
            if i + size > n:
                raise ValueError("truncated field")
            value, i = data[i:i + size], i + size
        elif wire in (1, 5):
            width = 8 if wire == 1 else 4
            if i + width > n:
                raise ValueError("truncated field")
            value, i = data[i:i + width], i + width
        else:
            raise ValueError(f"wire type {wire}")
        out.setdefault(number, []).append(value)
    return out


def _varint(data: bytes, i: int) -> tuple[int, int]:
    value = shift = 0
    while i < len(data):
        byte = data[i]
        i += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, i
        shift += 7
        if shift > 63:
            break
    raise ValueError("bad varint")


def message(f: dict | None, number: int) -> dict | None:
    for value in (f or {}).get(number, ()):
        if isinstance(value, bytes):
            try:
                return fields(value)
            except ValueError:
                continue
    return None


def integer(f: dict | None, number: int) -> int | None:
    values = [v for v in (f or {}).get(number, ()) if isinstance(v, int)]
    return values[-1] if values and values[-1] < 1 << 62 else None


def string(f: dict | None, number: int) -> str | None:
    for value in (f or {}).get(number, ()):
        if isinstance(value, bytes):
            text = value.decode("utf-8", "replace")
            if text.strip():
                return text
    return None


def timestamp(f: dict | None) -> datetime | None:
    """A google.protobuf.Timestamp `{#1 seconds, #2 nanos}`."""
    seconds = integer(f, 1)
    if not seconds or seconds > 4_102_444_800:  # beyond 2100: not a time
        return None
    return _EPOCH + timedelta(seconds=seconds, microseconds=(integer(f, 2) or 0) // 1000)


# --- rows

@dataclass
class Context:
    source_id: str
    session_id: str
    project_path: str


@dataclass
class Generation:
    idx: int
    response_id: str | None
    model: str | None
    label: str | None
    at: datetime | None
    buckets: Buckets


def generation(idx: int, blob: bytes) -> Generation | None:
    """One gen_metadata row; None when it holds no usage. ValueError when it is not protobuf."""
    chat = message(fields(blob), 1)
    usage = message(chat, 4) if chat else None
    if usage is None:
        return None
    # proto3 leaves a 0 out of the bytes: an absent count is a recorded 0, not an unknown one
    system, new, reads = integer(usage, 1) or 0, integer(usage, 2) or 0, integer(usage, 5) or 0
    text, thinking = integer(usage, 9) or 0, integer(usage, 10) or 0
    if not any((system, new, reads, text, thinking)):
        return None
    when = message(chat, 9)
    return Generation(idx, string(usage, 11), string(chat, 19), string(chat, 21), timestamp(message(when, 4)),
                      Buckets(input_uncached=system + new, cache_read=reads, output=text + thinking,
                              reasoning=thinking))


def models_by_label(gens: list[Generation]) -> dict[str, str]:
    """Display label -> the one concrete model id the file shows with it (ambiguous labels dropped)."""
    seen: dict[str, set] = {}
    for g in gens:
        if g.label and g.model and g.model != ROUTING:
            seen.setdefault(g.label, set()).add(g.model)
    return {label: next(iter(ids)) for label, ids in seen.items() if len(ids) == 1}


def session_meta(blob: bytes | None) -> tuple[datetime | None, str | None]:
    """(created-at, workspace path) from the trajectory_metadata_blob row."""
    if not blob:
        return None, None
    try:
        f = fields(blob)
    except ValueError:
        return None, None
    uri = string(message(f, 1), 1)
    path = uri[len("file://"):] if uri and uri.startswith("file://") else uri
    return timestamp(message(f, 2)), path


def normalise(gens: list[Generation], created: datetime | None, ctx: Context) -> dict[str, list[dict]]:
    labels = models_by_label(gens)
    usage, seen = [], set()
    for g in gens:
        if g.response_id and g.response_id in seen:
            continue  # the same generation written again
        seen.add(g.response_id)
        model = g.model if g.model and g.model != ROUTING else labels.get(g.label or "", g.model)
        at = g.at or created
        priced = price_buckets(g.buckets, model, "google", at)
        usage.append({"provider": PROVIDER, "source_id": ctx.source_id, "project_path": ctx.project_path,
                      "source_table": "gen_metadata", "source_rowid": g.idx, "session_id": ctx.session_id,
                      "message_id": None, "request_id": g.response_id, "requested_at": at, "model": model,
                      "llm_provider": "google", "is_sidechain": False, **g.buckets.columns(),
                      "cost_usd": priced.cost_usd, "cost_source": priced.cost_source,
                      "pricing_note": priced.note if g.at else f"{priced.note}; dated at the conversation's start"})
    priced = [u["cost_usd"] for u in usage if u["cost_usd"] is not None]
    if not usage:
        cost, source = 0.0, "estimated"
    elif len(priced) == len(usage):
        cost, source = round(sum(priced), 9), "estimated"
    else:
        cost, source = (round(sum(priced), 9), "partial") if priced else (None, "unknown")
    times = [u["requested_at"] for u in usage if u["requested_at"]]
    last = usage[-1] if usage else None
    session = {"provider": PROVIDER, "source_id": ctx.source_id, "project_path": ctx.project_path,
               "source_table": "trajectory_metadata_blob", "source_rowid": 0, "session_id": ctx.session_id,
               "parent_session_id": None, "root_session_id": ctx.session_id, "is_root": True, "title": None,
               "created_at": created or (min(times) if times else None),
               "updated_at": max(times) if times else created, "cost_usd": cost, "cost_source": source,
               "cost_includes_subagents": True, "forked_from_session_id": None, "inherited_cost_usd": None,
               "model": last["model"] if last else None, "llm_provider": "google",
               "total_tokens": sum(u["total_tokens"] or 0 for u in usage) if usage else None,
               "message_count": None, "summary_message_id": None, "extra_columns": None}
    return {"sessions": [session], "usage": usage}
