"""Antigravity CLI conversation databases in the shape the peers' readers expect
(transforms.antigravity.normalise), for the tests and the demo: a real SQLite file in WAL mode
with `gen_metadata` rows of GeneratorMetadata protobufs, encoded here field by field."""

import random
import sqlite3
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path

from transforms.pricing import Buckets, price_buckets


def varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def field_varint(number: int, value: int) -> bytes:
    return varint(number << 3) + varint(value)


def field_bytes(number: int, payload: bytes | str) -> bytes:
    data = payload.encode() if isinstance(payload, str) else payload
    return varint(number << 3 | 2) + varint(len(data)) + data


def timestamp(dt: datetime) -> bytes:
    seconds = int(dt.timestamp())
    return field_varint(1, seconds) + field_varint(2, int((dt.timestamp() - seconds) * 1e9))


def generation(*, system=1132, new=0, cache_read=0, text=0, thinking=0, response_id=None, model=None,
               label=None, at: datetime | None = None) -> bytes:
    usage = b"".join(field_varint(n, v) for n, v in ((1, system), (2, new), (5, cache_read), (9, text),
                                                     (10, thinking), (3, text + thinking)) if v)
    if response_id:
        usage += field_bytes(11, response_id)
    chat = field_bytes(4, usage)
    if model:
        chat += field_bytes(19, model)
    if label:
        chat += field_bytes(21, label)
    if at:
        chat += field_bytes(9, field_bytes(4, timestamp(at)))
    return field_bytes(1, chat)


def trajectory(created: datetime, workspace: str) -> bytes:
    return field_bytes(1, field_bytes(1, f"file://{workspace}")) + field_bytes(2, timestamp(created))


def write_conversation(path, generations: list[bytes], meta: bytes | None) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("CREATE TABLE gen_metadata (idx INTEGER PRIMARY KEY, data BLOB NOT NULL)")
    conn.execute("CREATE TABLE trajectory_metadata_blob (id INTEGER PRIMARY KEY, data BLOB NOT NULL)")
    for idx, blob in enumerate(generations):
        conn.execute("INSERT INTO gen_metadata (idx, data) VALUES (?, ?)", (idx, blob))
    if meta is not None:
        conn.execute("INSERT INTO trajectory_metadata_blob (data) VALUES (?)", (meta,))
    conn.close()
    return path


@dataclass
class HomeTruth:
    sessions: int = 0
    usage_rows: int = 0
    unpriced_rows: int = 0
    input_tokens: int = 0
    cache_read: int = 0
    output_tokens: int = 0
    reasoning: int = 0
    cost_usd: float = 0.0
    by_workspace: dict = field(default_factory=dict)


MODELS = ("gemini-2.5-pro", "gemini-3-flash-a")  # one in the price table, one Antigravity-only id


def generate_home(home, *, sessions=4, seed=0, workspaces=("/home/dev/webshop", "/home/dev/infra-tools"),
                  start=datetime(2026, 1, 6, 9, tzinfo=timezone.utc)) -> HomeTruth:
    """Write `sessions` conversations under `<home>/conversations/` (`home` is the CLI's
    `~/.gemini/antigravity-cli`)."""
    rng = random.Random(seed)
    truth = HomeTruth()
    folder = Path(home) / "conversations"
    for n in range(sessions):
        created = start + timedelta(hours=6 * n)
        workspace = workspaces[n % len(workspaces)]
        model = MODELS[n % len(MODELS)]
        gens = []
        for i in range(rng.randint(2, 5)):
            new, reads, text, thinking = (rng.randint(100, 5000), rng.randint(0, 30000) if i else 0,
                                          rng.randint(20, 800), rng.randint(0, 400))
            at = created + timedelta(seconds=20 * (i + 1))
            gens.append(generation(new=new, cache_read=reads, text=text, thinking=thinking,
                                   response_id=f"r{n}-{i}", model=model, label="Gemini", at=at))
            b = Buckets(input_uncached=1132 + new, cache_read=reads, output=text + thinking, reasoning=thinking)
            cost = price_buckets(b, model, "google", at).cost_usd
            truth.usage_rows += 1
            truth.unpriced_rows += cost is None
            truth.input_tokens += 1132 + new
            truth.cache_read += reads
            truth.output_tokens += text + thinking
            truth.reasoning += thinking
            truth.cost_usd += cost or 0.0
            truth.by_workspace[workspace] = truth.by_workspace.get(workspace, 0.0) + (cost or 0.0)
        write_conversation(folder / f"{uuid.UUID(int=rng.getrandbits(128), version=4)}.db", gens,
                           trajectory(created, workspace))
        truth.sessions += 1
    return truth
