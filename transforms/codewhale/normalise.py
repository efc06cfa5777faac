"""One CodeWhale session file (a whole-session JSON snapshot) -> canonical rows. Pure.

The traps (docs/FORMATS.md, "CodeWhale"):
- cost = `session_cost_usd + subagent_cost_usd`; a stored 0 is a real 0; no cost object means
  no cost was recorded, and it is estimated from `total_tokens` (or unknown, never $0); an
  amount that is not a number (text) is never a native cost and is reported: a garbled
  `session_cost_usd` makes the snapshot unusable (estimated or unknown, as above), a garbled
  `subagent_cost_usd` alone leaves the session's own spend as a `partial` cost;
- a fork copies its parent's totals: the fork keeps only what it added (see `fork_share`);
- `total_tokens` is one undivided total: stored as such;
- messages carry no id, time, model or usage: ids are `<session>:<index>`, times come from
  the journal when it lines up with the messages, else the session's `created_at`.
"""

from dataclasses import dataclass
from datetime import datetime

from transforms import jsontext
from transforms.codewhale.tools import COMMAND_KEYS, FILE_KEYS, tool_category
from transforms.findings import Findings
from transforms.pricing import price_total_tokens
from transforms.timestamps import from_iso
from transforms.tools import compact_json, decode_input, first_str

PROVIDER = "codewhale"
KNOWN_METADATA = {
    "id", "title", "created_at", "updated_at", "message_count", "total_tokens", "model",
    "model_provider", "workspace", "cost", "parent_session_id",
}
# content block type -> canonical part_type
PART_TYPES = {
    "text": "text", "thinking": "reasoning", "tool_use": "tool_call", "server_tool_use": "tool_call",
    "tool_result": "tool_result", "image_url": "image_url",
}
KEPT_RAW = {"tool_search_tool_result", "code_execution_tool_result"}  # known, no typed columns: `other`


class SessionFileError(ValueError):
    """The file is not a CodeWhale session: it is quarantined whole."""


@dataclass
class Context:
    source_id: str
    path: str
    run_at: datetime


def parse_session(text: str) -> dict:
    try:
        doc = jsontext.loads(text)
    except (ValueError, RecursionError) as exc:
        raise SessionFileError(f"not valid JSON: {exc}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("metadata"), dict):
        raise SessionFileError("no `metadata` object: not a CodeWhale session file")
    if not isinstance(doc["metadata"].get("id"), str) or not doc["metadata"]["id"]:
        raise SessionFileError("metadata.id is missing")
    if not isinstance(doc.get("messages", []), list):
        raise SessionFileError("`messages` is not an array")
    return doc


def _usd(value) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value:
        return 0.0  # a missing or garbled amount adds nothing
    return float(value)


def snapshot_cost(meta: dict) -> float | None:
    """The spend a cost snapshot records, or None when there is no usable snapshot.

    A stored 0 is a real 0, except where the snapshot itself says it knows nothing: a legacy
    row (`coverage_recorded` false) or a session none of whose turns could be priced. Those
    are treated as if no cost was recorded, so they are estimated or marked unknown, never $0.
    """
    cost = meta.get("cost")
    if not isinstance(cost, dict) or garbled_costs(meta):
        return None
    total = _usd(cost.get("session_cost_usd")) + _usd(cost.get("subagent_cost_usd"))
    if total == 0:
        if cost.get("coverage_recorded") is False:
            return None
        if _usd(cost.get("unpriced_turns")) > 0 and not _usd(cost.get("priced_turns")):
            return None
    return total


def garbled_costs(meta: dict) -> list[str]:
    """The cost snapshot's USD amounts that are present but not a number (text, a boolean): such
    a snapshot records no usable cost (not a native $0)."""
    cost = meta.get("cost")
    if not isinstance(cost, dict):
        return []
    return [k for k in ("session_cost_usd", "subagent_cost_usd")
            if cost.get(k) is not None and (isinstance(cost[k], bool) or not isinstance(cost[k], (int, float))
                                            or cost[k] != cost[k] or abs(cost[k]) == float("inf"))]


def fork_share(fork_total, parent_total):
    """What a fork added: its snapshot minus the parent's (never below zero), and what was taken.

    The parent's current snapshot stands in for its totals at the fork. If the parent went on
    after the fork, more than the inherited part is taken off: the fork is undercounted, but
    parent plus fork never count the pre-fork spend twice.
    """
    if fork_total is None or parent_total is None:
        return fork_total, None
    inherited = min(fork_total, parent_total)
    return fork_total - inherited, inherited


def _int(v):
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def _str(v):
    return v if isinstance(v, str) else None


def message_times(doc: dict, count: int) -> list | None:
    """Per-message times from the journal's active branch, when it lines up with `messages`."""
    journal = doc.get("journal")
    if not isinstance(journal, dict) or not isinstance(journal.get("entries"), list):
        return None
    entries = {e["id"]: e for e in journal["entries"] if isinstance(e, dict) and isinstance(e.get("id"), str)}
    chain, current, seen = [], journal.get("leaf_id") or doc.get("leaf_id"), set()
    if not isinstance(current, str):
        return None
    while current in entries and current not in seen:
        seen.add(current)
        chain.append(entries[current])
        current = entries[current].get("parent_id")
        if not isinstance(current, str):
            break
    chain.reverse()
    # compaction and branch summaries show in `messages` as system messages
    kinds = ("message", "user", "assistant", "system", "compaction", "branch_summary")
    times = [from_iso(e.get("created_at")) for e in chain if e.get("kind") in kinds]
    return times if len(times) == count and all(times) else None


def normalise(doc: dict, ctx: Context, parent: dict | None) -> tuple[dict[str, list[dict]], Findings]:
    meta = doc["metadata"]
    sid = meta["id"]
    findings = Findings()
    created = from_iso(meta.get("created_at")) or from_iso(meta.get("updated_at"))
    updated = from_iso(meta.get("updated_at")) or created
    project_path = _str(meta.get("workspace")) or ""

    def lineage(table: str, index: int) -> dict:
        return {"provider": PROVIDER, "source_id": ctx.source_id, "project_path": project_path,
                "source_table": table, "source_rowid": index}

    fork_of = _str(meta.get("parent_session_id"))
    total_tokens = _int(meta.get("total_tokens"))
    cost = snapshot_cost(meta)
    inherited = None
    garbled = garbled_costs(meta)
    partial = None
    if garbled:
        findings.notes.append(f"{len(garbled)} stored costs that are not a number ({', '.join(garbled)}): "
                              "not a native cost")
        if garbled == ["subagent_cost_usd"] and not fork_of:  # the session's own spend is known: a lower bound
            partial = _usd(meta["cost"].get("session_cost_usd"))
    if fork_of:
        parent_meta = parent["metadata"] if parent else None
        if parent_meta is None:
            findings.notes.append(f"fork of {fork_of}: the parent's file was not found, so its pre-fork "
                                  "spend may be included")
        else:
            cost, inherited = fork_share(cost, snapshot_cost(parent_meta))
            total_tokens, _ = fork_share(total_tokens, _int(parent_meta.get("total_tokens")))
    model, llm_provider = _str(meta.get("model")), _str(meta.get("model_provider"))
    if cost is not None:
        cost_source = "native"
    elif partial is not None:
        cost, cost_source = partial, "partial"
    elif total_tokens == 0:  # nothing was billed: a known $0, whatever the model's price
        cost, cost_source = 0.0, "estimated"
    else:
        priced = price_total_tokens(total_tokens, model, llm_provider, updated)
        cost, cost_source = priced.cost_usd, priced.cost_source
        findings.notes.append(f"no cost snapshot: {priced.cost_source} ({priced.note})")
    extra = {k: v for k, v in meta.items() if k not in KNOWN_METADATA}
    extra.update({k: v for k, v in doc.items() if k not in ("metadata", "messages")})
    if isinstance(meta.get("cost"), dict) or fork_of:
        extra["cost_snapshot"] = meta.get("cost")
        extra["total_tokens_snapshot"] = meta.get("total_tokens")
    session = lineage("metadata", 0)
    session.update(
        session_id=sid, parent_session_id=None, root_session_id=sid, is_root=True,
        title=_str(meta.get("title")), created_at=created, updated_at=updated,
        cost_usd=cost, cost_source=cost_source, cost_includes_subagents=True,
        forked_from_session_id=fork_of, inherited_cost_usd=inherited,
        model=model, llm_provider=llm_provider, total_tokens=total_tokens,
        message_count=_int(meta.get("message_count")),
        extra_columns=compact_json(extra) if extra else None,
    )
    out = {"sessions": [session], "messages": [], "parts": [], "tool_calls": [], "quarantine": []}
    messages = doc.get("messages", [])
    times = message_times(doc, len(messages)) or [created] * len(messages)
    open_calls: dict[str, dict] = {}
    for i, message in enumerate(messages):
        mid = f"{sid}:{i}"
        if not isinstance(message, dict) or not isinstance(message.get("content", []), list):
            out["messages"].append({**lineage("messages", i), "message_id": mid, "session_id": sid,
                                    "message_index": i, "created_at": times[i], "parts_ok": False})
            out["quarantine"].append({**lineage("messages", i), "key": mid, "error": "message is not an object "
                                      "with a content array", "raw": compact_json(message), "created_at": times[i]})
            continue
        role = _str(message.get("role"))
        blocks = message.get("content", [])
        out["messages"].append({
            **lineage("messages", i), "message_id": mid, "session_id": sid, "message_index": i, "role": role,
            "model": model if role == "assistant" else None,
            "llm_provider": llm_provider if role == "assistant" else None,
            "created_at": times[i], "is_summary": role == "system", "part_count": len(blocks), "parts_ok": True,
        })
        for j, block in enumerate(blocks):
            part = _part(block, findings)
            part.update(lineage("messages", i), message_id=mid, session_id=sid, part_index=j, role=role,
                        created_at=times[i], raw=compact_json(block))
            out["parts"].append(part)
            if part["part_type"] == "tool_call":
                call = _call(part, lineage("messages", i))
                out["tool_calls"].append(call)
                open_calls.setdefault(call["tool_call_id"], call)
            elif part["part_type"] == "tool_result":
                _result(part, open_calls.pop(part.get("tool_call_id"), None), out, lineage("messages", i))
    return out, findings


def _part(block, findings: Findings) -> dict:
    if not isinstance(block, dict):
        findings.unknown_part_types[None] += 1
        return {"part_type": "other", "native_part_type": None, "is_known_type": False}
    kind = _str(block.get("type"))
    part_type = PART_TYPES.get(kind, "other")
    known = kind in PART_TYPES or kind in KEPT_RAW
    if not known:
        findings.unknown_part_types[kind] += 1
    cols = {"part_type": part_type, "native_part_type": kind, "is_known_type": known}
    if part_type == "text":
        cols["text"] = _str(block.get("text"))
    elif part_type == "reasoning":
        cols["reasoning"] = _str(block.get("thinking"))
    elif part_type == "tool_call":
        args = block.get("input")
        cols.update(tool_call_id=_str(block.get("id")), tool_name=_str(block.get("name")),
                    tool_input=args if isinstance(args, str) or args is None else compact_json(args))
    elif part_type == "tool_result":
        content = block.get("content")
        cols.update(tool_call_id=_str(block.get("tool_use_id")),
                    tool_result=content if isinstance(content, str) or content is None else compact_json(content),
                    is_error=bool(block.get("is_error", False)))
    elif part_type == "image_url":
        image = block.get("image_url")
        cols["url"] = _str(image.get("url")) if isinstance(image, dict) else _str(image)
    return cols


def _call(part: dict, lineage: dict) -> dict:
    args = decode_input(part.get("tool_input"))
    name = part.get("tool_name")
    return {
        **lineage, "session_id": part["session_id"], "message_id": part["message_id"],
        "tool_call_id": part.get("tool_call_id"), "tool_name": name, "tool_category": tool_category(name),
        "input": compact_json(args) if args is not None else None, "input_raw": part.get("tool_input"),
        "is_input_valid": args is not None, "command": first_str(args, COMMAND_KEYS),
        "file_path": first_str(args, FILE_KEYS), "has_call": True, "has_result": False,
        "called_at": part["created_at"],
    }


def _result(part: dict, call: dict | None, out: dict, lineage: dict) -> None:
    if call is None:  # a result whose call is missing: kept, flagged
        call = {**lineage, "session_id": part["session_id"], "message_id": None,
                "tool_call_id": part.get("tool_call_id"), "tool_name": None, "tool_category": "other",
                "has_call": False, "called_at": part["created_at"]}
        out["tool_calls"].append(call)
    text = part.get("tool_result") or ""
    call.update(result_message_id=part["message_id"], has_result=True, is_error=part.get("is_error"),
                result_text=text, result_size=len(text.encode("utf-8", "replace")), result_at=part["created_at"])


def expected_counts(doc: dict) -> dict[str, int]:
    messages = doc.get("messages", [])
    return {
        "sessions": 1,
        "messages": len(messages),
        "parts": sum(len(m["content"]) for m in messages
                     if isinstance(m, dict) and isinstance(m.get("content", []), list) and "content" in m),
    }
