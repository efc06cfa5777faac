"""Seeded CodeWhale session files, shaped as `SavedSession` (docs/FORMATS.md,
"CodeWhale: record shapes"), for the tests and the demo. Stdlib only. It counts what it writes, so tests compare the lake to the truth."""

import json
import random
import uuid
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path


def text_block(text):
    return {"type": "text", "text": text}


def thinking_block(thinking):
    return {"type": "thinking", "thinking": thinking}


def tool_use_block(call_id, name, args):
    return {"type": "tool_use", "id": call_id, "name": name, "input": args}


def tool_result_block(call_id, content, is_error=None):
    block = {"type": "tool_result", "tool_use_id": call_id, "content": content}
    if is_error is not None:
        block["is_error"] = is_error
    return block


def rfc3339(dt: datetime) -> str:
    return dt.astimezone(timezone.utc).isoformat(timespec="microseconds").replace("+00:00", "Z")


def cost_snapshot(session_usd: float, subagent_usd: float = 0.0) -> dict:
    return {
        "session_cost_usd": session_usd, "session_cost_cny": round(session_usd * 7.1, 6),
        "subagent_cost_usd": subagent_usd, "subagent_cost_cny": round(subagent_usd * 7.1, 6),
        "displayed_cost_high_water_usd": round((session_usd + subagent_usd) * 1.2, 6),
        "displayed_cost_high_water_cny": 0.0, "priced_turns": 3, "unpriced_turns": 0,
        "cny_priced_turns": 3, "cny_unpriced_turns": 0, "coverage_recorded": True,
    }


def session_doc(sid, *, title, created_at: datetime, workspace, messages, total_tokens, updated_at=None,
                model="deepseek-v4-flash", model_provider="deepseek", cost: dict | None = None,
                parent=None, forked_from_message_count=None, journal=False) -> dict:
    """A whole session file. `cost=None` leaves the cost object out (a legacy file)."""
    updated_at = updated_at or created_at + timedelta(minutes=5)
    meta = {"id": sid, "title": title, "created_at": rfc3339(created_at), "updated_at": rfc3339(updated_at),
            "message_count": len(messages), "total_tokens": total_tokens, "model": model,
            "model_provider": model_provider, "workspace": str(workspace), "mode": "agent"}
    if cost is not None:
        meta["cost"] = cost
    if parent:
        meta["parent_session_id"] = parent
        meta["forked_from_message_count"] = forked_from_message_count
    meta.update(cumulative_turn_secs=41, spawn_depth=0)
    doc = {"schema_version": 1, "metadata": meta, "messages": messages, "system_prompt": None}
    if journal:
        entries, parent_id = [], None
        for i, message in enumerate(messages):
            entry_id = f"{sid[:8]}-e{i}"
            entries.append({"id": entry_id, "parent_id": parent_id, "kind": "message", "message": message,
                            "created_at": rfc3339(created_at + timedelta(seconds=30 * i)), "spawn_depth": 0})
            parent_id = entry_id
        doc["journal"] = {"entries": entries, "leaf_id": parent_id, "schema_version": 1, "spawn_depth": 0}
        doc["leaf_id"] = parent_id
    return doc


def write_session(sessions_dir, doc: dict) -> Path:
    """Pretty-printed, as CodeWhale writes it (temp file + rename)."""
    sessions_dir = Path(sessions_dir)
    sessions_dir.mkdir(parents=True, exist_ok=True)
    path = sessions_dir / f"{doc['metadata']['id']}.json"
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(doc, indent=2, ensure_ascii=False))
    tmp.replace(path)
    return path


@dataclass
class HomeTruth:
    sessions: int = 0
    messages: int = 0
    cost_usd: float = 0.0  # over the sessions with a cost snapshot
    without_cost: int = 0  # sessions written with no cost object (legacy files)
    parts_by_type: Counter = field(default_factory=Counter)  # canonical part types
    tool_calls_by_name: Counter = field(default_factory=Counter)
    tool_errors: int = 0
    by_workspace: Counter = field(default_factory=Counter)  # cost per workspace


_TOOLS = [
    ("exec_shell", lambda r: {"command": r.choice(["npm test", "cargo build", "ls -la", "git status"])}),
    ("read_file", lambda r: {"path": r.choice(["src/main.rs", "README.md", "src/login.ts"])}),
    ("edit_file", lambda r: {"path": "src/login.ts", "old": "401", "new": "200"}),
    ("grep_files", lambda r: {"pattern": r.choice(["TODO", "fn main", "login"])}),
    ("fetch_url", lambda r: {"url": "https://example.test/docs"}),
    ("mcp_github_create_issue", lambda r: {"title": "bug"}),
]


def generate_home(home, *, sessions=6, seed=0, workspaces=("/home/dev/webshop", "/home/dev/infra-tools"),
                  start=datetime(2026, 1, 6, 9, tzinfo=timezone.utc), without_cost=0) -> HomeTruth:
    """Write `sessions` session files under `<home>/sessions`, plus the side files CodeWhale
    keeps beside them (which must be skipped). The last `without_cost` sessions have no cost
    object (legacy files); every other one of those uses a model no price table knows."""
    rng = random.Random(seed)
    truth = HomeTruth()
    sessions_dir = Path(home) / "sessions"
    for n in range(sessions):
        sid = str(uuid.UUID(int=rng.getrandbits(128), version=4))
        workspace = workspaces[n % len(workspaces)]
        messages = [{"role": "user", "content": [text_block("Fix the failing test")]}]
        for step in range(rng.randint(1, 4)):
            name, make_args = rng.choice(_TOOLS)
            call_id = f"call_{n:02d}_{step}"
            is_error = rng.random() < 0.2
            messages.append({"role": "assistant", "content": [thinking_block("Let me check."),
                                                              tool_use_block(call_id, name, make_args(rng))]})
            messages.append({"role": "user", "content": [
                tool_result_block(call_id, "FAIL" if is_error else "ok", is_error if is_error else None)]})
            truth.tool_calls_by_name[name] += 1
            truth.tool_errors += is_error
        messages.append({"role": "assistant", "content": [text_block("Done.")]})
        session_usd, subagent_usd = round(rng.uniform(0.001, 0.05), 6), round(rng.choice([0, 0.002, 0.01]), 6)
        legacy = n >= sessions - without_cost
        doc = session_doc(sid, title=f"Session {n}", created_at=start + timedelta(hours=7 * n),
                          workspace=workspace, messages=messages, total_tokens=rng.randint(5_000, 90_000),
                          cost=None if legacy else cost_snapshot(session_usd, subagent_usd), journal=n % 2 == 0,
                          model="glm-4.6" if legacy and n % 2 else "deepseek-v4-flash")
        write_session(sessions_dir, doc)
        truth.sessions += 1
        truth.messages += len(messages)
        if legacy:
            truth.without_cost += 1
        else:
            truth.cost_usd += session_usd + subagent_usd
            truth.by_workspace[workspace] += session_usd + subagent_usd
        for m in messages:
            for block in m["content"]:
                truth.parts_by_type[{"thinking": "reasoning", "tool_use": "tool_call"}.get(block["type"], block["type"])] += 1
    # side files: crash recovery and bookkeeping, never sessions
    (sessions_dir / "checkpoints").mkdir(exist_ok=True)
    (sessions_dir / "checkpoints" / "latest.json").write_text('{"metadata": {"id": "checkpoint"}}')
    (sessions_dir / "checkpoints" / "offline_queue.json").write_text("[]")
    (sessions_dir / "session_boot_owners.json").write_text("{}")
    (sessions_dir / "latest.json").write_text('{"metadata": {"id": "latest"}}')
    return truth
