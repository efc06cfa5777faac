"""Amp behind the provider interface. A source is one thread file (transforms.amp.discover)."""

from datetime import datetime
from pathlib import Path

from transforms import jsontext
from transforms.amp import discover as amp_discover
from transforms.amp.discover import PROVIDER
from transforms.amp.normalise import Context, expected_counts, fork_parent, normalise
from transforms.findings import Findings
from transforms.provider import AgentProvider, Extract, read_file
from transforms.sources import Source


class AmpProvider(AgentProvider):
    name = PROVIDER
    discovery = amp_discover

    def extract(self, source: Source, workdir: Path, run_at: datetime, cache_dir: Path | None = None) -> Extract:
        # Amp rewrites the thread file whole: one read is a consistent snapshot
        text = read_file(source.path).decode("utf-8", "replace")
        thread = _thread(text)
        if thread is None:
            row = {"provider": PROVIDER, "source_id": source.source_id, "project_path": source.project_path,
                   "source_table": "thread", "source_rowid": 0, "key": source.path,
                   "error": "malformed thread file: not a JSON object with an `id`", "raw": text, "created_at": run_at}
            return Extract(rows={"quarantine": [row]}, findings=Findings())
        parent = _parent(source, thread)
        rows, findings = normalise(thread, Context(source.source_id, source.project_path, run_at), parent)
        return Extract(rows=rows, findings=findings, schema_version=_version(thread),
                       expected=expected_counts(thread, parent))


def _thread(text: str) -> dict | None:
    try:
        doc = jsontext.loads(text)
    except (ValueError, RecursionError):
        return None
    return doc if isinstance(doc, dict) and isinstance(doc.get("id"), str) and doc["id"] else None


def _parent(source: Source, thread: dict) -> dict | None:
    """The thread a fork was made from, when its file sits beside the fork."""
    parent_id = fork_parent(thread)
    if not parent_id or "/" in parent_id or "\\" in parent_id:
        return None
    try:
        return _thread((Path(source.path).parent / f"{parent_id}.json").read_bytes().decode("utf-8", "replace"))
    except OSError:
        return None


def _version(thread: dict) -> int | None:
    v = thread.get("v")
    return v if isinstance(v, int) and not isinstance(v, bool) else None
